// --count-calls: what one training step asks of a GPU, counted, not timed. On emulated GPUs
// (an -Dcuda=emulated build) the CUDA runtime, cuBLAS, cuDNN and NCCL count every call the
// host makes (kernels/emu/cudart/README.md, "Counting calls"); this runs training steps as
// brigade-train does — the model as one stage on one GPU, the pipeline runtime's step, one
// micro-batch, SGD with momentum, each step submitted behind the one before — and reads the
// counts around the steps. The counts are
// exact and the same on every run: a step's launch budget, which a real GPU could only time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "layers/model/model_file.h"

namespace brigade::bench {

// True in a build whose CUDA runtime counts calls (emulated GPUs); on a real CUDA runtime, or
// without CUDA, count_calls has nothing to read.
bool call_counting_built();

struct CallCountOptions {
  std::vector<Device> devices = {Device::cuda(0)};  // GPUs only, each measured alone
  std::vector<std::string> impls = {"handwritten", "vendor"};  // CUDA paths (kernels/cuda/path.h)
  std::vector<int64_t> batches = {128};
  // Steps before counting: streams, handles, descriptors and caches made once, and with CUDA
  // graphs the step that sizes them and the one that captures them (pipeline/runtime/
  // device_graphs.h): the steps counted replay them.
  int warmup = 2;
  int steps = 2;   // steps counted; the figures are per step (their mean)
  size_t top = 10;  // entry points listed, most called first
  uint64_t seed = 1;
  bool cuda_graphs = true;  // pipeline::RuntimeOptions::cuda_graphs
};

// One (device, path, batch, precision, graphs setting): the calls of a step, per step.
struct CallCountRow {
  std::string device;  // "cuda:0"
  std::string impl;    // handwritten | vendor
  std::string precision = "fp32";  // the process's setting while counted (kernels/precision.h)
  bool cuda_graphs = true;         // CallCountOptions::cuda_graphs
  int64_t batch = 0;
  double kernel_launches = 0;
  double library_calls = 0;  // cuBLAS, cuDNN and NCCL calls that put work on a stream
  double graph_launches = 0;
  // Calls that waited on the host for the GPU, per step submitted behind a pending one
  // (pipeline::Runtime::submit): its wait for the step before it. Steps here run back to
  // back, with nothing between them.
  double host_blocking = 0;
  // The same in a step submitted with none pending: the host's waits inside a step.
  double host_blocking_inside = 0;
  std::vector<std::pair<std::string, double>> top;  // entry points, most called first
};

// Counts in the process's precision (kernels/precision.h), which the rows name.
// Throws brigade::Error when the build cannot count (call_counting_built()) or a device is no
// GPU of this machine.
std::vector<CallCountRow> count_calls(const model::ModelSpec& spec, const CallCountOptions& o);

}  // namespace brigade::bench

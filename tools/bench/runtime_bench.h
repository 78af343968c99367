// Runtime level: training samples/s of a whole network as brigade-train trains it on one
// device — one stage, one micro-batch, stepped by the pipeline runtime (one_stage_run.h), each
// step submitted behind the one before (pipeline::Runtime::submit: the host waits once per
// step, for the step before, while this one is queued). Beside the model level
// (model_bench.h: the same arithmetic in a plain loop on the caller's thread, no runtime
// around it) it shows what the runtime costs or saves: its host threads and streams, and on a
// GPU the GPU's verdict and CUDA graphs (--cuda-graphs on|off: the step as three graph
// launches, or every kernel and library call issued by the host). Each row also gives the
// device's memory: the peak in use during the last step (with graphs on, their memory pools
// included), what brigade-train's --metrics lines report as peak_memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/math_mode.h"
#include "layers/model/model_file.h"
#include "tools/bench/model_bench.h"

namespace brigade::bench {

struct RuntimeRow : ModelRow {
  std::optional<bool> cuda_graphs;  // on a GPU; none on a CPU device
  uint64_t peak_bytes = 0;          // the device's peak in use during the last step timed
  uint64_t reserved_bytes = 0;      // in use + cached by its allocator, after the steps
};

struct RuntimeBenchOptions {
  std::vector<int64_t> batches = {32, 128, 512};
  std::vector<int> threads = {1, 2};
  bool cpu = true;
  std::vector<std::string> cuda_impls = {"handwritten", "vendor"};  // used when a GPU is here
  std::vector<bool> cuda_graphs = {true};  // the GPU rows, one of each
  MathMode math = MathMode::fp32;          // the vendor rows' arithmetic (cuda_impl.h)
  int cpu_device = 0;
  // Steps before the clock starts; at least 2 are run, so that with graphs on the steps timed
  // replay them (the first step sizes them, the second captures them: device_graphs.h).
  int warmup = 2;
  int repetitions = 5;
  int steps = 3;  // steps per repetition, back to back; the repetition ends with a flush
  uint64_t seed = 1;
};

// One row per CPU thread count and batch (o.cpu), then per CUDA path, graphs setting and
// batch on cuda:0 when this machine has a GPU; in the process's precision.
std::vector<RuntimeRow> bench_runtime(const model::ModelSpec& spec, const RuntimeBenchOptions& o);

}  // namespace brigade::bench

// Model level: training samples/s of a whole network on ONE device.
//
// Every layer of the model file is placed on the same device (its `device` blocks merged),
// and a training step is what one stage on one device does in brigade-train (without the
// runtime's host thread and streams around it): zero the gradients, forward with a tape,
// softmax + cross-entropy, the fused backward (no input gradient for the first layer), one
// SGD-with-momentum update. Dropout is on when the model has it. The
// batches are synthetic (tools/data: same shapes as Fashion-MNIST), made into tensors
// before the clock starts, as a training loop's staging would have them ready.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/math_mode.h"
#include "layers/model/model_file.h"

namespace brigade::bench {

struct ModelRow {
  std::string device;  // "cpu:0", "cuda:0"
  std::string impl;    // cpu | handwritten | vendor
  int threads = 0;     // CPU threads (0 on a GPU)
  int64_t batch = 0;
  double step_ms = 0;        // median over the repetitions
  // Process CPU time per step (every thread), median: on a machine shared with other work it
  // counts what this process ran, not what it waited for a core. For a 1-thread device it is
  // the steadier figure (the waiting threads block, they do not spin).
  double cpu_step_ms = 0;
  double samples_per_s = 0;  // batch / step time
  double gflops = 0;         // training FLOPs / step time
  std::string precision = "fp32";  // of Dense and Conv2D (kernels/precision.h)
};

struct ModelBenchOptions {
  std::vector<int64_t> batches = {32, 128, 512};
  std::vector<int> threads = {1, 2};
  bool cpu = true;
  std::vector<std::string> cuda_impls = {"handwritten", "vendor"};  // used when a GPU is here
  MathMode math = MathMode::fp32;  // the vendor rows' arithmetic (cuda_impl.h)
  int cpu_device = 0;
  int warmup = 2;        // steps
  int repetitions = 5;
  int steps = 3;         // steps per repetition (one synchronisation per repetition)
  uint64_t seed = 1;
};

// Forward + weight gradient + input gradient FLOPs of one training sample: 3 x the forward,
// less the first layer's input gradient (never computed).
double training_flops_per_sample(const model::ModelSpec& spec);

std::vector<ModelRow> bench_model(const model::ModelSpec& spec, const ModelBenchOptions& options);

}  // namespace brigade::bench

// Op level: the time and GFLOP/s of each op of a network's layers, per implementation.
//
// The ops are those of every conv2d, dense and maxpool2d layer of a model file, at its own
// shapes and a chosen batch: conv forward / backward-data / backward-filter (+bias), the
// dense layers' three GEMMs (forward, backward-data, backward-weight), pooling forward and
// backward. Implementations:
//   reference     kernels/reference, one thread, on a smaller batch (it is slow; GFLOP/s is
//                 a rate, so the batch matters little for the loops it runs)
//   cpu           kernels/ops.h on a cpu:N device with T threads (kernels/cpu, OpenBLAS)
//   handwritten   kernels/ops.h on cuda:0 with the hand-written kernels (kernels/cuda)
//   vendor        kernels/ops.h on cuda:0 with cuBLAS / cuDNN (kernels/cuda/path.h)
// The cpu and cuda rows go through ops.h exactly as a training step does: the output and
// workspace allocations (cached), the enqueue, then a stream synchronisation per repetition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/math_mode.h"
#include "layers/model/model_file.h"

namespace brigade::bench {

struct OpRow {
  std::string layer;   // "conv2d_2"
  std::string op;      // "conv fwd", "conv bwd-data", "conv bwd-filter", "gemm fwd", ...
  std::string impl;    // reference | cpu | handwritten | vendor
  std::string device;  // "cpu:0", "cuda:0"
  int threads = 0;     // CPU threads (0 on a GPU)
  int64_t batch = 0;
  std::string shape;   // "x (128, 32, 26, 26) w (64, 32, 3, 3)"
  double flops = 0;    // per call; 0 for ops that are data movement (pooling)
  double ms = 0;       // median per call
  double cpu_ms = 0;   // process CPU time per call (every thread), median: steadier when shared
  double gflops = 0;   // flops / time; 0 when flops is 0
  std::string precision = "fp32";  // of Dense and Conv2D (kernels/precision.h)
};

struct OpBenchOptions {
  int64_t batch = 128;
  int64_t reference_batch = 8;
  std::vector<std::string> impls = {"reference", "cpu", "handwritten", "vendor"};
  std::vector<int> threads = {1, 2};  // for the cpu implementation
  int cpu_device = 0;                 // the cpu:N configured with each thread count
  int warmup = 2;
  int repetitions = 5;
  double min_repetition_s = 0.05;     // calls per repetition: enough to last this long
  MathMode math = MathMode::fp32;     // the vendor rows' arithmetic (cuda_impl.h)
};

// Runs every op of `spec` for every implementation available here (the CUDA ones only when
// a GPU is present) and returns one row per (op, implementation, thread count).
std::vector<OpRow> bench_ops(const model::ModelSpec& spec, const OpBenchOptions& options);

// cuBLAS SGEMM n x n x n through ops::dense_forward on cuda:0 in `math`: the GPU's practical
// peak (in tf32, the tensor cores'). Only call with a GPU present.
double gpu_sgemm_peak_gflops(int n, int repetitions, MathMode math);

}  // namespace brigade::bench

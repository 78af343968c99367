// GEMM level: the bf16 GEMM (kernels/cpu/gemm_bf16.h) beside OpenBLAS's SGEMM (gemm.h) at the
// GEMM shapes of a network's layers, both on the calling thread, and the ratio of their times.
//
// The shapes are im2col's over the whole batch (conv forward NN (K, C·R·S)·(C·R·S, N·P·Q),
// backward-data TN, backward-filter NT) and the dense layers' three (forward NT, backward-data
// NN, backward-weight TN): the products the layers ask for, before kernels/cpu cuts them into
// groups of samples or replaces a 3x3 convolution's by Winograd's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/model/model_file.h"

namespace brigade::bench {

struct GemmRow {
  std::string layer;   // "conv2d_2"
  std::string op;      // "conv fwd", "gemm bwd-weight", ...
  std::string layout;  // "NN", "NT", "TN": op(A) op(B)
  int64_t M = 0, N = 0, K = 0;
  double sgemm_ms = 0, bf16_ms = 0;  // median CPU time of the calling thread per call
  double sgemm_gflops = 0, bf16_gflops = 0;
};

// Every GEMM of `spec`'s conv2d and dense layers at `batch`, each timed `repetitions` times.
std::vector<GemmRow> bench_gemm_bf16(const model::ModelSpec& spec, int64_t batch,
                                     int repetitions);

}  // namespace brigade::bench

// What gemm_tiled_batched (gemm_tiled.cu) does besides one matrix product: a batch of
// products, and the epilogue applied to each element of C as it is stored.
#pragma once

#include <cstdint>

namespace brigade {

// `count` products C_b = op(A_b) · op(B_b), X_b = X + b · stride_x (strides in elements; a
// stride of 0 reuses one matrix for every b). With `summed`, the products are ADDED into one
// C instead, b = 0, 1, ... in that order (stride_c unused): a reduction over the batch
// inside the GEMM. Its blocks are C's tiles, each walking every product's K, so it suits a C
// of many tiles; for a small C (a conv's filter gradient) conv2d.cu keeps the products apart,
// each with its own blocks, and sums them afterwards.
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool summed = false;
};

// Applied to v = alpha · (sum) + beta · C before it is stored: + bias[i] (bias_per_row) or
// + bias[j] for element (i, j) of C when bias is not null, then max(v, 0) when relu (a NaN
// stays NaN), then v rounded to bf16 values when round_bf16 (bf16_bits.cuh: precision bf16's
// layer boundary, kernels/ops.h's Bf16Rounding). The bias, the activation and the boundary of
// a layer, fused into its GEMM: no second pass over the output.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool bias_per_row = false;
  bool relu = false;
  bool round_bf16 = false;
};

}  // namespace brigade

// What gemm_tiled_batched (gemm_tiled.cu) does besides one matrix product: a batch of
// products, and the epilogue applied to each element of C as it is stored.
#pragma once

#include <cstdint>

namespace brigade {

// `count` products C_b = op(A_b) · op(B_b), X_b = X + b · stride_x (strides in elements; a
// stride of 0 reuses one matrix for every b). Each product's C has its own tiles of blocks.
//
// With `summed`, the products are ADDED into one C instead, b = 0, 1, ... in that order
// (stride_c unused): a reduction over the batch inside the GEMM (a conv's filter gradient
// over the samples; split-K spreads a small C's long reduction over many blocks).
//
// With `side_by_side`, the products share A (stride_a 0) and are laid side by side along N:
// one product of count·N columns, column b·N + j of which is column j of C_b and of op(B_b),
// tiled as one C. For many products of few columns each (a conv's y_n = W·col_n on a 3×3
// image: 9 columns a sample), whose own tiles would be mostly empty. op(B) not transposed,
// and a bias only per row (a per-column bias would be ambiguous).
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool summed = false;
  bool side_by_side = false;
};

// How a launch tiles C for a batch of (M, N) products: the products its grid holds apart
// (blockIdx.z, before split-K) and the columns of each: one of count · N side by side, one
// summed C, else `count` Cs of N.
struct GemmLayout {
  int64_t products, columns;
};
inline GemmLayout gemm_layout(int64_t N, const GemmBatch& batch) {
  if (batch.side_by_side) return {1, batch.count * N};
  return {batch.summed ? 1 : batch.count, N};
}

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

// What the two hand-written GEMMs share: gemm_tiled.cu (fp32, CUDA cores) and gemm_mma.cu
// (bf16 operands, tensor cores) take the same arguments (gemm.h: transposes, pitches, a batch
// of products one C each or summed, gemm_args.h's epilogue), check them the same way, give
// the emulator the same extents, and store C through the same epilogue. Included by both .cu
// files after kernels/emu/kernel.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/error.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/gemm_args.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// The elements a row-major (rows, cols) matrix with leading dimension ld spans: the last
// row needs only its first `cols`.
inline int64_t matrix_extent(int64_t rows, int64_t cols, int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

// The elements `count` matrices `stride` apart span.
inline int64_t batch_extent(int64_t count, int64_t stride, int64_t one) {
  return one == 0 ? 0 : (count - 1) * stride + one;
}

// What a launch touches of each operand (BRIGADE_EXTENT), in elements.
struct GemmExtents {
  int64_t a, b, c, bias;
};

// The checks of a GEMM call, errors naming `op` and the shape; then the operands' extents.
// block_m × block_n is the kernel's tile of C (the grid's limits are in tiles).
inline GemmExtents check_gemm_call(const char* op, bool trans_a, bool trans_b, int64_t M,
                                   int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                                   const GemmBatch& batch, const GemmEpilogue& epilogue,
                                   int64_t block_m, int64_t block_n) {
  // A is stored (M, K), or (K, M) when transposed; its rows must be at least that wide.
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0 && lda >= a_cols && ldb >= b_cols && ldc >= N &&
                    lda >= 1 && ldb >= 1 && ldc >= 1,
                op << ": invalid sizes (M, N, K) = (" << M << ", " << N << ", " << K
                   << "), trans_a " << trans_a << ", trans_b " << trans_b
                   << ", (lda, ldb, ldc) = (" << lda << ", " << ldb << ", " << ldc << ")");
  BRIGADE_CHECK(batch.count >= 1 && batch.stride_a >= 0 && batch.stride_b >= 0 &&
                    batch.stride_c >= 0,
                op << ": invalid batch: " << batch.count << " products, strides (A, B, C) = ("
                   << batch.stride_a << ", " << batch.stride_b << ", " << batch.stride_c << ")");
  BRIGADE_CHECK(!batch.side_by_side ||
                    (!batch.summed && !trans_b && (batch.stride_a == 0 || batch.count == 1) &&
                     (epilogue.bias == nullptr || epilogue.bias_per_row)),
                op << ": products side by side need one A (stride 0, not " << batch.stride_a
                   << "), op(B) not transposed (trans_b " << trans_b << "), no summing (summed "
                   << batch.summed << ") and a bias per row if any");
  const GemmLayout layout = gemm_layout(N, batch);
  BRIGADE_CHECK((layout.columns + block_n - 1) / block_n < (int64_t(1) << 31) &&
                    (M + block_m - 1) / block_m < 65536 && layout.products < 65536,
                op << ": (M, N) = (" << M << ", " << layout.columns << ") over " << layout.products
                   << " products exceeds the grid limits (65535 products, "
                   << 65535 * block_m << " rows)");
  return {batch_extent(batch.count, batch.stride_a, matrix_extent(trans_a ? K : M, a_cols, lda)),
          batch_extent(batch.count, batch.stride_b, matrix_extent(trans_b ? N : K, b_cols, ldb)),
          batch_extent(batch.summed ? 1 : batch.count, batch.stride_c, matrix_extent(M, N, ldc)),
          epilogue.bias == nullptr ? 0 : epilogue.bias_per_row ? M : N};
}

// Whether every offset a kernel forms fits in int32: each is below the largest extent (or
// `scratch`, a split-K partial's), or a row/column/k index at most one tile (`overhang`) past
// its size.
inline bool gemm_fits_int32(const GemmExtents& e, int64_t scratch, int64_t M, int64_t N,
                            int64_t K, const GemmBatch& batch, int64_t lda, int64_t ldb,
                            int64_t ldc, int64_t overhang) {
  const int64_t largest =
      std::max({e.a, e.b, e.c, scratch, M, N, K * batch.count, lda, ldb, ldc}) + overhang;
  return largest <= std::numeric_limits<int32_t>::max();
}

// Column j of a launch whose products lie side by side along N (gemm_args.h), `per` columns
// each, `stride` elements apart: its offset from product 0's column 0. per == 0: products
// not side by side, j itself.
template <class Index>
__device__ __forceinline__ Index side_by_side_column(Index j, Index per, Index stride) {
  return per == 0 ? j : j / per * stride + j % per;
}

// Element (r, c) of C stored: v = alpha · sum + beta · C (C not read when beta is 0), plus
// bias[r] or bias[c], then ReLU (a NaN stays NaN), then the rounding to bf16 values.
// gemm_args.h's epilogue.
template <class Index>
__device__ __forceinline__ void gemm_store(float* out, float sum, float alpha, float beta,
                                           const float* bias, bool bias_per_row, bool relu,
                                           bool round_bf16, Index r, Index c) {
  float v = alpha * sum;
  if (beta != 0.0f) v += beta * *out;  // beta 0: C is not read
  if (bias != nullptr) v += bias[bias_per_row ? r : c];
  *out = bf16_value_if(round_bf16, relu && v <= 0.0f ? 0.0f : v);  // NaN stays NaN
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

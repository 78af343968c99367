// Dense (fully connected) forward and backward as three GEMMs and two small kernels.
//
//   forward          y  (N, out) = x (N, in) · Wᵀ (in, out)      gemm(no, trans)  + bias
//   backward-data    dx (N, in)  = dy (N, out) · W (out, in)     gemm(no, no)
//   backward-weight  dw (out, in) += dyᵀ (out, N) · x (N, in)    gemm(trans, no), beta = 1
//   backward-bias    db (out)    += column sums of dy            one thread per column
//
// The GEMMs are gemm_tiled (gemm_tiled.cu), or in precision bf16 gemm_mma_bf16 (gemm_mma.cu,
// tensor cores) on operands in bfloat16 storage (the *_bf16 launchers); the forward one adds
// the bias and applies the ReLU as it stores y (its epilogue: one launch for the layer). What
// is left is add_bias_rows_kernel, the same epilogue for the cuBLAS path (thread per element
// of y, column j = i % cols), and bias_grad_columns_kernel (thread j sums
// column j of dy going down the rows: threads j, j+1, ... read neighbouring addresses of
// the same row together, so the reads are coalesced, and each sum runs in row order).
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void add_bias_rows_kernel(float* y /* (rows, cols) */, const float* b /* (cols) */,
                                     int64_t rows, int64_t cols, bool relu, bool round_bf16) {
  for (int64_t i = grid_first(); i < rows * cols; i += grid_stride()) {
    float v = y[i] + (b ? b[i % cols] : 0.0f);
    y[i] = bf16_value_if(round_bf16, relu && v <= 0.0f ? 0.0f : v);  // NaN stays NaN
  }
}

__global__ void bias_grad_columns_kernel(const float* dy /* (N, out) */, float* db /* (out) */,
                                         int64_t N, int64_t out) {
  for (int64_t j = grid_first(); j < out; j += grid_stride()) {
    float acc = 0.0f;
    for (int64_t n = 0; n < N; ++n) acc += dy[n * out + j];
    db[j] += acc;
  }
}

namespace {
void check_dense(const char* op, int64_t N, int64_t in, int64_t out) {
  BRIGADE_CHECK(N >= 0 && in >= 1 && out >= 1,
                op << ": invalid shape: batch " << N << ", in " << in << ", out " << out
                   << " (in and out must be positive)");
}
}  // namespace

void add_bias_rows(float* y, const float* b, int64_t rows, int64_t cols, bool relu,
                   const Stream& stream, bool round_bf16) {
  BRIGADE_CHECK(rows >= 0 && cols >= 1, "add_bias_rows: invalid shape (" << rows << ", " << cols << ")");
  if (rows == 0 || (b == nullptr && !relu && !round_bf16)) return;  // nothing to do
  BRIGADE_LAUNCH(add_bias_rows_kernel, elementwise_blocks(rows * cols), kElementwiseBlock, 0,
                 stream, BRIGADE_EXTENT(y, rows * cols), BRIGADE_EXTENT(b, cols), rows, cols, relu,
                 round_bf16);
}

void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu) {
  check_dense("dense_forward", N, in, out);
  gemm_tiled_batched(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, GemmBatch{},
                     GemmEpilogue{b, /*bias_per_row=*/false, relu}, stream);
}

void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, const Stream& stream) {
  check_dense("dense_backward_data", N, in, out);
  gemm_tiled(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, stream);
}

void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, const Stream& stream) {
  check_dense("dense_backward_weight", N, in, out);
  if (N == 0) return;  // an empty batch adds nothing
  gemm_tiled(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, stream);
}

void dense_forward_bf16(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y,
                        int64_t N, int64_t in, int64_t out, const Stream& stream, bool relu,
                        bool round_bf16) {
  check_dense("dense_forward_bf16", N, in, out);
  gemm_mma_bf16(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, GemmBatch{},
                GemmEpilogue{b, /*bias_per_row=*/false, relu, round_bf16}, stream);
}

void dense_backward_data_bf16(const cpu::bf16* dy, const cpu::bf16* w, float* dx, int64_t N,
                              int64_t in, int64_t out, const Stream& stream, bool round_bf16) {
  check_dense("dense_backward_data_bf16", N, in, out);
  gemm_mma_bf16(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, GemmBatch{},
                GemmEpilogue{nullptr, false, false, round_bf16}, stream);
}

void dense_backward_weight_bf16(const cpu::bf16* x, const cpu::bf16* dy, float* dw, int64_t N,
                                int64_t in, int64_t out, const Stream& stream) {
  check_dense("dense_backward_weight_bf16", N, in, out);
  if (N == 0) return;  // an empty batch adds nothing
  gemm_mma_bf16(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, GemmBatch{},
                GemmEpilogue{}, stream);
}

void dense_backward_bias(const float* dy, float* db, int64_t N, int64_t out,
                         const Stream& stream) {
  check_dense("dense_backward_bias", N, 1, out);
  if (N == 0) return;
  BRIGADE_LAUNCH(bias_grad_columns_kernel, elementwise_blocks(out), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(dy, N * out), BRIGADE_EXTENT(db, out), N, out);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

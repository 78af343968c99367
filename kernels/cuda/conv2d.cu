// Conv2D as im2col + GEMM: the convolution lowered to the matrix product of gemm_tiled.cu.
//
// The lowering. For one sample x (C, H, W), im2col builds col (C·R·S, P·Q): row (c, r, s),
// column (p, q) holds the input pixel that output (p, q) multiplies with tap (r, s) of
// channel c — x[c][p·stride - pad_h + r][q·stride - pad_w + s], or 0 in the padding. Then
//
//   forward          y_n  (K, P·Q)      = W (K, C·R·S) · col (C·R·S, P·Q)        (+ bias)
//   backward-data    col  (C·R·S, P·Q)  = Wᵀ (C·R·S, K) · dy_n (K, P·Q);  dx_n = col2im(col)
//   backward-filter  dw   (K, C·R·S)   += dy_n (K, P·Q) · colᵀ (P·Q, C·R·S)
//   backward-bias    db[k]             += sum over n, p, q of dy[n][k][p][q]
//
// W is already (K, C·R·S) row-major: KCRS memory read as a matrix. The launcher loops over
// the samples on the stream, reusing one sample's col as the workspace.
//
// Kernels and who computes what:
//   im2col_kernel      thread per col element (row (c, r, s), column (p, q)): one read.
//   col2im_kernel      thread per input pixel (c, h, w): GATHERS the col entries that read
//                      it (every (r, s) whose (p, q) lands on it) — no atomics, and the sum's
//                      order is fixed, so results are deterministic.
//   channel_bias_kernel  thread per y element: adds b[k] of its channel k, then the ReLU.
//   bias_grad_kernel   block per output channel k: the block's threads sum dy[·][k][·][·]
//                      with a strided loop, then block_sum (reduce.cuh) adds their sums.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void im2col_kernel(const float* x /* (C, H, W) */, float* col /* (C·R·S, P·Q) */,
                              Conv2dShape s) {
  const int64_t PQ = s.P * s.Q, total = s.C * s.R * s.S * PQ;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t row = i / PQ, pq = i % PQ;           // row = (c·R + r)·S + t
    const int64_t c = row / (s.R * s.S), r = row / s.S % s.R, t = row % s.S;
    const int64_t h = (pq / s.Q) * s.stride - s.pad_h + r;
    const int64_t v = (pq % s.Q) * s.stride - s.pad_w + t;
    col[i] = (h >= 0 && h < s.H && v >= 0 && v < s.W) ? x[(c * s.H + h) * s.W + v] : 0.0f;
  }
}

__global__ void col2im_kernel(const float* col /* (C·R·S, P·Q) */, float* dx /* (C, H, W) */,
                              Conv2dShape s) {
  const int64_t total = s.C * s.H * s.W;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t c = i / (s.H * s.W), h = i / s.W % s.H, v = i % s.W;
    float acc = 0.0f;
    for (int64_t r = 0; r < s.R; ++r) {
      // Output row p reads input row h through tap r iff p·stride - pad_h + r == h.
      const int64_t ph = h + s.pad_h - r;
      if (ph < 0 || ph % s.stride != 0 || ph / s.stride >= s.P) continue;
      for (int64_t t = 0; t < s.S; ++t) {
        const int64_t qw = v + s.pad_w - t;
        if (qw < 0 || qw % s.stride != 0 || qw / s.stride >= s.Q) continue;
        acc += col[((c * s.R + r) * s.S + t) * s.P * s.Q + (ph / s.stride) * s.Q + qw / s.stride];
      }
    }
    dx[i] = acc;
  }
}

constexpr int kBiasBlock = 256;

__global__ void bias_grad_kernel(const float* dy /* (N, K, P, Q) */, float* db /* (K) */,
                                 Conv2dShape s) {
  __shared__ float scratch[32];
  const int64_t k = blockIdx.x, PQ = s.P * s.Q;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < s.N * PQ; i += blockDim.x)  // i = n·PQ + pq
    acc += dy[((i / PQ) * s.K + k) * PQ + i % PQ];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) db[k] += acc;
}

__global__ void channel_bias_kernel(float* y /* (N, K, P·Q) */, const float* b /* (K) */,
                                    int64_t N, int64_t K, int64_t PQ, bool relu) {
  for (int64_t i = grid_first(); i < N * K * PQ; i += grid_stride()) {  // channel (i / PQ) % K
    const float v = y[i] + (b ? b[i / PQ % K] : 0.0f);
    y[i] = relu && v <= 0.0f ? 0.0f : v;  // NaN stays NaN
  }
}

namespace {
void check_conv(const char* op, const Conv2dShape& s, const float* workspace, bool needs_workspace = true) {
  // Every output window must start inside the (padded) input; the kernels bounds-check
  // every read, so this only rejects shapes that make_conv2d_shape could not have made.
  const bool fits = s.N >= 1 && s.C >= 1 && s.H >= 1 && s.W >= 1 && s.K >= 1 && s.R >= 1 &&
                    s.S >= 1 && s.stride >= 1 && s.pad_h >= 0 && s.pad_w >= 0 &&
                    s.pad_h < s.R && s.pad_w < s.S && s.P >= 1 && s.Q >= 1 &&
                    (s.P - 1) * s.stride - s.pad_h < s.H && (s.Q - 1) * s.stride - s.pad_w < s.W;
  BRIGADE_CHECK(fits, op << ": invalid shape: input (" << s.N << ", " << s.C << ", " << s.H
                         << ", " << s.W << "), " << s.K << " filters " << s.R << "x" << s.S
                         << ", stride " << s.stride << ", padding (" << s.pad_h << ", "
                         << s.pad_w << "), output " << s.P << "x" << s.Q
                         << " (build shapes with make_conv2d_shape)");
  BRIGADE_CHECK(!needs_workspace || workspace != nullptr, op << ": workspace is null; pass "
                                         << s.C * s.R * s.S * s.P * s.Q
                                         << " floats (conv2d_workspace_floats)");
}
}  // namespace

int64_t conv2d_workspace_floats(const Conv2dShape& s) { return s.C * s.R * s.S * s.P * s.Q; }

void im2col(const float* x, float* col, const Conv2dShape& s, const Stream& stream) {
  check_conv("im2col", s, col);
  const int64_t total = conv2d_workspace_floats(s);
  BRIGADE_LAUNCH(im2col_kernel, elementwise_blocks(total), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, s.C * s.H * s.W), BRIGADE_EXTENT(col, total), s);
}

void col2im(const float* col, float* dx, const Conv2dShape& s, const Stream& stream) {
  check_conv("col2im", s, col);
  const int64_t total = s.C * s.H * s.W;
  BRIGADE_LAUNCH(col2im_kernel, elementwise_blocks(total), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(col, conv2d_workspace_floats(s)), BRIGADE_EXTENT(dx, total), s);
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* workspace, const Stream& stream, bool relu) {
  check_conv("conv2d_forward", s, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  for (int64_t n = 0; n < s.N; ++n) {
    im2col(x + n * s.C * s.H * s.W, workspace, s, stream);
    float* yn = y + n * s.K * PQ;  // (K, P·Q)
    gemm_tiled(false, false, s.K, PQ, CRS, 1.0f, w, CRS, workspace, PQ, 0.0f, yn, PQ, stream);
  }
  if (b == nullptr && !relu) return;
  BRIGADE_LAUNCH(channel_bias_kernel, elementwise_blocks(s.y_size()), kElementwiseBlock, 0,
                 stream, BRIGADE_EXTENT(y, s.y_size()), BRIGADE_EXTENT(b, s.K), s.N, s.K, PQ, relu);
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* workspace, const Stream& stream) {
  check_conv("conv2d_backward_data", s, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  for (int64_t n = 0; n < s.N; ++n) {
    // col (C·R·S, P·Q) = Wᵀ · dy_n: W is stored (K, C·R·S), hence trans_a with lda = C·R·S.
    gemm_tiled(true, false, CRS, PQ, s.K, 1.0f, w, CRS, dy + n * s.K * PQ, PQ, 0.0f, workspace,
               PQ, stream);
    col2im(workspace, dx + n * s.C * s.H * s.W, s, stream);
  }
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float* workspace, const Stream& stream) {
  check_conv("conv2d_backward_filter", s, workspace);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  for (int64_t n = 0; n < s.N; ++n) {
    im2col(x + n * s.C * s.H * s.W, workspace, s, stream);
    // dw (K, C·R·S) += dy_n (K, P·Q) · colᵀ: col is stored (C·R·S, P·Q), hence trans_b.
    gemm_tiled(false, true, s.K, CRS, PQ, 1.0f, dy + n * s.K * PQ, PQ, workspace, PQ, 1.0f, dw,
               CRS, stream);
  }
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream) {
  check_conv("conv2d_backward_bias", s, nullptr, false);
  BRIGADE_CHECK(s.K < (int64_t(1) << 31), "conv2d_backward_bias: too many channels " << s.K);
  BRIGADE_LAUNCH(bias_grad_kernel, static_cast<unsigned>(s.K), kBiasBlock, 0, stream,
                 BRIGADE_EXTENT(dy, s.y_size()), BRIGADE_EXTENT(db, s.K), s);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

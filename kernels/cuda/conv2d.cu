// Conv2D as im2col + GEMM: the convolution lowered to the batched matrix products of
// gemm_tiled.cu (gemm_mma.cu in precision bf16), a fixed number of launches per call whatever
// the batch.
//
// The lowering. For sample n of x (N, C, H, W), im2col builds col_n (C·R·S, P·Q): row
// (c, r, s), column (p, q) holds the input pixel that output (p, q) multiplies with tap (r, s)
// of channel c — x[n][c][p·stride - pad_h + r][q·stride - pad_w + s], or 0 in the padding.
// One launch builds the columns of many samples at once, col (n, C·R·S, P·Q). Then
//
//   forward          y_n  (K, P·Q)      = W (K, C·R·S) · col_n (C·R·S, P·Q)  + bias, ReLU
//   backward-data    col_n (C·R·S, P·Q) = Wᵀ (C·R·S, K) · dy_n (K, P·Q);  dx_n = col2im(col_n)
//   backward-filter  dw (K, C·R·S)     += Σ_n dy_n (K, P·Q) · col_nᵀ (P·Q, C·R·S)
//   backward-bias    db[k]             += sum over n, p, q of dy[n][k][p][q]
//
// each product ONE gemm_tiled_batched launch over the samples. Forward and backward-data
// share W (stride 0) and lay the samples' products side by side along N (gemm_args.h): one C
// of N·P·Q columns, tiled as one matrix, so that a small image's few columns a sample (9 for
// conv2d_4's 3×3 output) fill whole tiles instead of 9 of each tile's 128 columns, while y_n
// and dy_n stay in their NCHW places. Backward-filter sums its products inside the GEMM (a
// summed batch, beta 1: added to dw as it is stored). dw is small — (K, C·R·S) is 1 to 9 tiles of
// 128×128 for the question's network — over the deepest K of the network, N·P·Q, which is
// what split-K is for (gemm_split_k.cuh): conv2d_2's at batch 128, 3 tiles over 9,216 slices,
// runs as 42 blocks per tile. (Before split-K each sample's product had blocks of its own,
// written to a workspace of N·K·C·R·S floats and summed by a kernel of its own: one more
// launch, and for conv2d_4 37 MB written and read again for a 295 KB result.)
// W is already (K, C·R·S) row-major: KCRS memory read as a matrix. The bias and ReLU are the
// forward GEMM's epilogue (bias per row k of y_n), not a pass of their own.
//
// Why sample-major columns, (n, C·R·S, P·Q), and not one (C·R·S, N·P·Q) matrix: y_n = W·col_n
// is then sample n's (K, P·Q) block of y in its NCHW place, and dy_n is read where it lies,
// so no launch permutes (K, N·P·Q) to and from (N, K, P·Q). Why explicit columns and not an
// implicit GEMM that computes col's entries inside its tile loads: the GEMM stays one
// readable kernel shared with Dense, and im2col and col2im stay kernels of their own with
// their own tests (an adjoint pair). The cost is the workspace: C·R·S·P·Q floats a sample
// of columns.
//
// Workspace and chunks. The launchers lower as many samples per pass as the caller's
// workspace holds: conv2d_workspace_floats(s) asks for every sample's columns up to a budget
// of 256 MiB (kConvLoweringBudgetFloats, stream_workspace.h, where a step's memory check
// counts them), so a call makes a fixed number of launches (2 for each of forward,
// backward-data and backward-filter, 1 for backward-bias) up to that budget — the question's
// network at batch 128 needs at most 85 MB (conv2d_2's columns) — and as many per pass beyond
// it.
//
// Precision bf16 (the *_bf16 launchers): x, w and dy arrive narrowed to bfloat16 storage, and
// the same passes run with bf16 columns and gemm_mma_bf16 (tensor cores) for the products.
// im2col copies, so lowering the narrowed x gives the narrowed columns bit for bit, at half the
// bytes, and the N·C·H·W narrowing (by the caller) is R·S times less work than narrowing the
// columns would be. Backward-data's columns and backward-filter's dw are the GEMMs' float
// outputs, as in fp32.
//
// Kernels and who computes what:
// im2col and col2im divide per element: 32-bit indices where the sizes allow (launch.cuh).
//   im2col_kernel      thread per col element (sample n, row (c, r, s), column (p, q)): one read.
//   col2im_kernel      thread per input pixel (n, c, h, w): GATHERS the col entries that read
//                      it (every (r, s) whose (p, q) lands on it) — no atomics, and the sum's
//                      order is fixed, so results are deterministic.
//   bias_grad_kernel   block per output channel k: the block's threads sum dy[·][k][·][·]
//                      with a strided loop, then block_sum (reduce.cuh) adds their sums.
#include <algorithm>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/stream_workspace.h"
#include "kernels/cuda/window_sizes.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// T: float, or cpu::bf16 in precision bf16 (a copy: the columns of narrowed x are x's
// columns narrowed, and take half the bytes).
template <class Index, class T>
__global__ void im2col_kernel(const T* x /* (N, C, H, W) */, T* col /* (N, C·R·S, P·Q) */,
                              Conv2dShape shape) {
  const WindowSizes<Index> s(shape);
  const Index PQ = s.P * s.Q, CRS = s.C * s.R * s.S, total = s.N * CRS * PQ;
  for (Index i = grid_first<Index>(); i < total; i += grid_stride<Index>()) {
    const Index n = i / (CRS * PQ), row = i / PQ % CRS, pq = i % PQ;  // row = (c·R + r)·S + t
    const Index c = row / (s.R * s.S), r = row / s.S % s.R, t = row % s.S;
    const Index h = (pq / s.Q) * s.stride - s.pad_h + r;
    const Index v = (pq % s.Q) * s.stride - s.pad_w + t;
    col[i] = (h >= 0 && h < s.H && v >= 0 && v < s.W)
                 ? x[((n * s.C + c) * s.H + h) * s.W + v]
                 : T{};  // 0.0f, or bf16 +0 (bits 0)
  }
}

template <class Index>
__global__ void col2im_kernel(const float* col /* (N, C·R·S, P·Q) */,
                              float* dx /* (N, C, H, W) */, Conv2dShape shape,
                              bool round_bf16) {
  const WindowSizes<Index> s(shape);
  const Index total = s.N * s.C * s.H * s.W, PQ = s.P * s.Q;
  for (Index i = grid_first<Index>(); i < total; i += grid_stride<Index>()) {
    const Index nc = i / (s.H * s.W), h = i / s.W % s.H, v = i % s.W;  // nc = n·C + c
    const float* col_nc = col + nc * s.R * s.S * PQ;  // sample n's rows (c, ·, ·)
    float acc = 0.0f;
    for (Index r = 0; r < s.R; ++r) {
      // Output row p reads input row h through tap r iff p·stride - pad_h + r == h.
      const Index ph = h + s.pad_h - r;
      if (ph < 0 || ph % s.stride != 0 || ph / s.stride >= s.P) continue;
      for (Index t = 0; t < s.S; ++t) {
        const Index qw = v + s.pad_w - t;
        if (qw < 0 || qw % s.stride != 0 || qw / s.stride >= s.Q) continue;
        acc += col_nc[(r * s.S + t) * PQ + (ph / s.stride) * s.Q + qw / s.stride];
      }
    }
    dx[i] = bf16_value_if(round_bf16, acc);
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

namespace {
// One sample's columns: (C·R·S, P·Q), its share of the workspace.
int64_t sample_columns(const Conv2dShape& s) { return s.C * s.R * s.S * s.P * s.Q; }

void check_conv(const char* op, const Conv2dShape& s) {
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
}

// The samples one pass lowers: as many shares as `workspace_floats` holds, at most N.
int64_t samples_per_pass(const char* op, const Conv2dShape& s, const float* workspace,
                         int64_t workspace_floats) {
  check_conv(op, s);
  BRIGADE_CHECK(workspace != nullptr, op << ": workspace is null; pass "
                                         << conv2d_workspace_floats(s)
                                         << " floats (conv2d_workspace_floats)");
  BRIGADE_CHECK(workspace_floats >= sample_columns(s),
                op << ": a workspace of " << workspace_floats
                   << " floats is smaller than one sample's share, " << sample_columns(s)
                   << "; pass " << conv2d_workspace_floats(s) << " floats (conv2d_workspace_floats)");
  return std::min(s.N, workspace_floats / sample_columns(s));
}

// The shape of samples [n0, n0 + count) of s.
Conv2dShape samples(const Conv2dShape& s, int64_t count) {
  Conv2dShape part = s;
  part.N = count;
  return part;
}
}  // namespace

int64_t conv2d_workspace_floats(const Conv2dShape& s) {
  return ::brigade::cuda::conv_lowering_floats(sample_columns(s), s.N);
}

namespace {
template <class T>
void launch_im2col(const T* x, T* col, const Conv2dShape& s, const Stream& stream) {
  check_conv("im2col", s);
  const int64_t total = s.N * sample_columns(s);
  with_index_type(std::max(total, s.x_size()), [&](auto index) {
    BRIGADE_LAUNCH((im2col_kernel<decltype(index), T>), elementwise_blocks(total),
                   kElementwiseBlock, 0, stream, BRIGADE_EXTENT(x, s.x_size()),
                   BRIGADE_EXTENT(col, total), s);
  });
}
}  // namespace

void im2col(const float* x, float* col, const Conv2dShape& s, const Stream& stream) {
  launch_im2col(x, col, s, stream);
}

void im2col(const cpu::bf16* x, cpu::bf16* col, const Conv2dShape& s, const Stream& stream) {
  launch_im2col(x, col, s, stream);
}

void col2im(const float* col, float* dx, const Conv2dShape& s, const Stream& stream,
            bool round_bf16) {
  check_conv("col2im", s);
  const int64_t columns = s.N * sample_columns(s);
  with_index_type(std::max(columns, s.x_size()), [&](auto index) {
    BRIGADE_LAUNCH(col2im_kernel<decltype(index)>, elementwise_blocks(s.x_size()),
                   kElementwiseBlock, 0, stream, BRIGADE_EXTENT(col, columns),
                   BRIGADE_EXTENT(dx, s.x_size()), s, round_bf16);
  });
}

namespace {

// The products of either precision, chosen by the operands' type: gemm_tiled on float, the
// tensor cores' gemm_mma_bf16 on bfloat16. alpha 1; beta 0 (C overwritten) or 1 (added to).
void conv_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const GemmBatch& batch, const GemmEpilogue& epilogue, const Stream& stream) {
  gemm_tiled_batched(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, batch, epilogue,
                     stream);
}
void conv_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const cpu::bf16* A,
               int64_t lda, const cpu::bf16* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const GemmBatch& batch, const GemmEpilogue& epilogue, const Stream& stream) {
  gemm_mma_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, batch, epilogue, stream);
}

template <class T>
void forward_passes(const T* x, const T* w, const float* b, float* y, const Conv2dShape& s,
                    float* workspace, int64_t workspace_floats, const Stream& stream, bool relu,
                    bool round_bf16) {
  const int64_t pass = samples_per_pass("conv2d_forward", s, workspace, workspace_floats);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  T* col = reinterpret_cast<T*>(workspace);  // (pass, C·R·S, P·Q)
  for (int64_t n0 = 0; n0 < s.N; n0 += pass) {
    const Conv2dShape part = samples(s, std::min(pass, s.N - n0));
    im2col(x + n0 * s.C * s.H * s.W, col, part, stream);
    // y_n (K, P·Q) = W · col_n for each sample of the pass; W shared (stride 0).
    conv_gemm(false, false, s.K, PQ, CRS, w, CRS, col, PQ, 0.0f, y + n0 * s.K * PQ, PQ,
              GemmBatch{part.N, 0, CRS * PQ, s.K * PQ, false, /*side_by_side=*/true},
              GemmEpilogue{b, /*bias_per_row=*/true, relu, round_bf16}, stream);
  }
}

template <class T>
void backward_data_passes(const T* dy, const T* w, float* dx, const Conv2dShape& s,
                          float* workspace, int64_t workspace_floats, const Stream& stream,
                          bool round_bf16) {
  const int64_t pass = samples_per_pass("conv2d_backward_data", s, workspace, workspace_floats);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  for (int64_t n0 = 0; n0 < s.N; n0 += pass) {
    const Conv2dShape part = samples(s, std::min(pass, s.N - n0));
    // col_n (C·R·S, P·Q) = Wᵀ · dy_n: W is stored (K, C·R·S), hence trans_a with lda = C·R·S.
    // The columns are the GEMM's float output in either precision.
    conv_gemm(true, false, CRS, PQ, s.K, w, CRS, dy + n0 * s.K * PQ, PQ, 0.0f, workspace, PQ,
              GemmBatch{part.N, 0, s.K * PQ, CRS * PQ, false, /*side_by_side=*/true},
              GemmEpilogue{}, stream);
    col2im(workspace, dx + n0 * s.C * s.H * s.W, part, stream, round_bf16);
  }
}

template <class T>
void backward_filter_passes(const T* x, const T* dy, float* dw, const Conv2dShape& s,
                            float* workspace, int64_t workspace_floats, const Stream& stream) {
  const int64_t pass = samples_per_pass("conv2d_backward_filter", s, workspace, workspace_floats);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  T* col = reinterpret_cast<T*>(workspace);  // (pass, C·R·S, P·Q)
  for (int64_t n0 = 0; n0 < s.N; n0 += pass) {
    const Conv2dShape part = samples(s, std::min(pass, s.N - n0));
    im2col(x + n0 * s.C * s.H * s.W, col, part, stream);
    // dw (K, C·R·S) += Σ_n dy_n (K, P·Q) · col_nᵀ over the pass's samples, in sample order:
    // col_n is stored (C·R·S, P·Q), hence trans_b; one summed GEMM, beta 1.
    conv_gemm(false, true, s.K, CRS, PQ, dy + n0 * s.K * PQ, PQ, col, PQ, 1.0f, dw, CRS,
              GemmBatch{part.N, s.K * PQ, CRS * PQ, 0, true}, GemmEpilogue{}, stream);
  }
}

}  // namespace

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                    const Stream& stream, bool relu) {
  forward_passes(x, w, b, y, s, workspace, workspace_floats, stream, relu, /*round_bf16=*/false);
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* workspace, int64_t workspace_floats, const Stream& stream) {
  backward_data_passes(dy, w, dx, s, workspace, workspace_floats, stream, /*round_bf16=*/false);
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float* workspace, int64_t workspace_floats, const Stream& stream) {
  backward_filter_passes(x, dy, dw, s, workspace, workspace_floats, stream);
}

void conv2d_forward_bf16(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y,
                         const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                         const Stream& stream, bool relu, bool round_bf16) {
  forward_passes(x, w, b, y, s, workspace, workspace_floats, stream, relu, round_bf16);
}

void conv2d_backward_data_bf16(const cpu::bf16* dy, const cpu::bf16* w, float* dx,
                               const Conv2dShape& s, float* workspace, int64_t workspace_floats,
                               const Stream& stream, bool round_bf16) {
  backward_data_passes(dy, w, dx, s, workspace, workspace_floats, stream, round_bf16);
}

void conv2d_backward_filter_bf16(const cpu::bf16* x, const cpu::bf16* dy, float* dw,
                                 const Conv2dShape& s, float* workspace,
                                 int64_t workspace_floats, const Stream& stream) {
  backward_filter_passes(x, dy, dw, s, workspace, workspace_floats, stream);
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream) {
  check_conv("conv2d_backward_bias", s);
  BRIGADE_CHECK(s.K < (int64_t(1) << 31), "conv2d_backward_bias: too many channels " << s.K);
  BRIGADE_LAUNCH(bias_grad_kernel, static_cast<unsigned>(s.K), kBiasBlock, 0, stream,
                 BRIGADE_EXTENT(dy, s.y_size()), BRIGADE_EXTENT(db, s.K), s);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

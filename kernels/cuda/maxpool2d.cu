// Max pooling with argmax, forward and backward.
//
// Forward, thread per OUTPUT element (plane = n·C + c, p, q): scan the R×S window in
// row-major order, keep the first largest value (a later equal one does not replace it) and
// its position h·W + w in the plane. Padding cells are skipped, so they never win. A NaN
// ranks above every number, so a window holding one outputs its first NaN and the gradient
// goes there (the reference's NaN rule, as in PyTorch).
//
// Backward, thread per INPUT element (plane, h, w): the gradient of x[h][w] is the sum of
// dy over the windows whose argmax is (h, w). Rather than scatter dy through argmax (which
// needs atomicAdd when windows overlap, and makes the sum's order depend on timing), each
// input thread GATHERS: it visits only the outputs whose window covers it,
//
//   p·stride - pad_h <= h < p·stride - pad_h + R   <=>   ceil((h + pad_h - R + 1) / stride)
//                                                         <= p <= floor((h + pad_h) / stride)
//
// (likewise q), in increasing (p, q) — the reference's order, hence bit-identical results.
//
// Both divide per element: 32-bit indices where the sizes allow (launch.cuh).
#include <algorithm>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/window_sizes.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// Whether v takes the place of m, the window's maximum so far: v is larger, or v is the
// window's first NaN (`v > m` is false whenever either is NaN; `v != v` only for a NaN).
__device__ __forceinline__ bool replaces_max(float v, float m) {
  return v > m || (v != v && m == m);
}

template <class Index>
__global__ void maxpool2d_forward_kernel(const float* x /* (N, C, H, W) */,
                                         float* y /* (N, C, P, Q) */,
                                         int32_t* argmax /* (N, C, P, Q) */, Pool2dShape shape) {
  const WindowSizes<Index> s(shape);
  const Index outputs = s.N * s.C * s.P * s.Q;
  for (Index o = grid_first<Index>(); o < outputs; o += grid_stride<Index>()) {
    const Index plane = o / (s.P * s.Q), p = o / s.Q % s.P, q = o % s.Q;
    const float* xp = x + plane * s.H * s.W;
    Index best = -1;
    for (Index r = 0; r < s.R; ++r) {
      const Index h = p * s.stride - s.pad_h + r;
      if (h < 0 || h >= s.H) continue;
      for (Index t = 0; t < s.S; ++t) {
        const Index v = q * s.stride - s.pad_w + t;
        if (v < 0 || v >= s.W) continue;
        if (best < 0 || replaces_max(xp[h * s.W + v], xp[best])) best = h * s.W + v;
      }
    }
    y[o] = xp[best];  // best >= 0: every window holds at least one input cell (checked)
    argmax[o] = static_cast<int32_t>(best);
  }
}

// The smallest p with p·stride - pad + window > h, i.e. ceil((h + pad - window + 1) / stride),
// clamped at 0 (C++ division truncates towards zero, hence the case split).
template <class Index>
__device__ __forceinline__ Index first_window(Index h, Index pad, Index window, Index stride) {
  const Index num = h + pad - window + 1;
  return num <= 0 ? 0 : (num + stride - 1) / stride;
}

template <class Index>
__global__ void maxpool2d_backward_kernel(const float* dy /* (N, C, P, Q) */,
                                          const int32_t* argmax /* (N, C, P, Q) */,
                                          float* dx /* (N, C, H, W) */, Pool2dShape shape,
                                          bool round_bf16) {
  const WindowSizes<Index> s(shape);
  const Index inputs = s.N * s.C * s.H * s.W;
  for (Index i = grid_first<Index>(); i < inputs; i += grid_stride<Index>()) {
    const Index plane = i / (s.H * s.W), h = i / s.W % s.H, v = i % s.W;
    const Index p_last = (h + s.pad_h) / s.stride, q_last = (v + s.pad_w) / s.stride;
    const Index p_end = p_last < s.P ? p_last + 1 : s.P;  // one past the last window
    const Index q_end = q_last < s.Q ? q_last + 1 : s.Q;
    const Index q_begin = first_window(v, s.pad_w, s.S, s.stride);
    const int32_t me = static_cast<int32_t>(h * s.W + v);
    float acc = 0.0f;
    for (Index p = first_window(h, s.pad_h, s.R, s.stride); p < p_end; ++p)
      for (Index q = q_begin; q < q_end; ++q) {
        const Index o = (plane * s.P + p) * s.Q + q;
        if (argmax[o] == me) acc += dy[o];
      }
    dx[i] = bf16_value_if(round_bf16, acc);
  }
}

namespace {
void check_pool(const char* op, const Pool2dShape& s) {
  // Every window must hold at least one input cell (else its max is undefined): pad < window
  // and the last window starts inside the input. make_pool2d_shape guarantees both.
  const bool fits = s.N >= 1 && s.C >= 1 && s.H >= 1 && s.W >= 1 && s.R >= 1 && s.S >= 1 &&
                    s.stride >= 1 && s.pad_h >= 0 && s.pad_w >= 0 && s.pad_h < s.R &&
                    s.pad_w < s.S && s.P >= 1 && s.Q >= 1 &&
                    (s.P - 1) * s.stride - s.pad_h < s.H && (s.Q - 1) * s.stride - s.pad_w < s.W &&
                    s.H * s.W <= INT32_MAX;
  BRIGADE_CHECK(fits, op << ": invalid shape: input (" << s.N << ", " << s.C << ", " << s.H
                         << ", " << s.W << "), pool " << s.R << "x" << s.S << ", stride "
                         << s.stride << ", padding (" << s.pad_h << ", " << s.pad_w
                         << "), output " << s.P << "x" << s.Q
                         << " (build shapes with make_pool2d_shape)");
}
}  // namespace

void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,
                       const Stream& stream) {
  check_pool("maxpool2d_forward", s);
  with_index_type(std::max(s.x_size(), s.y_size()), [&](auto index) {
    BRIGADE_LAUNCH(maxpool2d_forward_kernel<decltype(index)>, elementwise_blocks(s.y_size()),
                   kElementwiseBlock, 0, stream, BRIGADE_EXTENT(x, s.x_size()),
                   BRIGADE_EXTENT(y, s.y_size()), BRIGADE_EXTENT(argmax, s.y_size()), s);
  });
}

void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s,
                        const Stream& stream, bool round_bf16) {
  check_pool("maxpool2d_backward", s);
  with_index_type(std::max(s.x_size(), s.y_size()), [&](auto index) {
    BRIGADE_LAUNCH(maxpool2d_backward_kernel<decltype(index)>, elementwise_blocks(s.x_size()),
                   kElementwiseBlock, 0, stream, BRIGADE_EXTENT(dy, s.y_size()),
                   BRIGADE_EXTENT(argmax, s.y_size()), BRIGADE_EXTENT(dx, s.x_size()), s,
                   round_bf16);
  });
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

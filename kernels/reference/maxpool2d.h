// MaxPooling2D, the reference.
//
// y[n,c,p,q] is the largest x in the window of rows p*stride - pad_h + [0, R) and columns
// q*stride - pad_w + [0, S) (cells outside the input never win). argmax records where it came
// from, as the int32 index h * W + w inside the input's (H, W) plane.
// Ties: the FIRST maximum in row-major window order wins (a later equal value does not
// replace it), so backward sends the whole gradient to that one cell.
// NaN: a window holding a NaN outputs NaN, as in PyTorch, so the stage's finite check sees
// it. NaN ranks above every number (+inf included) and the tie rule holds among NaNs: argmax
// is the window's FIRST NaN, and backward sends the whole gradient there. Every kernel of
// kernels/cpu and kernels/cuda follows these rules (cuDNN: see kernels/cuda/cudnn_pool.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/shapes.h"

namespace brigade::ref {

// Whether v takes the place of m, the window's maximum so far: v is larger, or v is the
// window's first NaN (`v > m` is false whenever either is NaN, hence the explicit test).
template <class T>
bool replaces_max(T v, T m) {
  return v > m || (std::isnan(v) && !std::isnan(m));
}

// x: (N, C, H, W)  y: (N, C, P, Q)  argmax: (N, C, P, Q) int32 plane indices
template <class T>
void maxpool2d_forward(const T* x, T* y, int32_t* argmax, const Pool2dShape& s) {
  for (int64_t plane = 0; plane < s.N * s.C; ++plane) {
    const T* xp = x + plane * s.H * s.W;
    for (int64_t p = 0; p < s.P; ++p)
      for (int64_t q = 0; q < s.Q; ++q) {
        int64_t best = -1;
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t h = p * s.stride - s.pad_h + r;
          if (h < 0 || h >= s.H) continue;
          for (int64_t t = 0; t < s.S; ++t) {
            const int64_t v = q * s.stride - s.pad_w + t;
            if (v < 0 || v >= s.W) continue;
            if (best < 0 || replaces_max(xp[h * s.W + v], xp[best])) best = h * s.W + v;
          }
        }
        const int64_t o = (plane * s.P + p) * s.Q + q;
        y[o] = xp[best];
        argmax[o] = static_cast<int32_t>(best);
      }
  }
}

// dy, argmax: (N, C, P, Q)  dx: (N, C, H, W), overwritten. Overlapping windows (stride < R)
// may pick the same cell twice: their gradients add.
template <class T>
void maxpool2d_backward(const T* dy, const int32_t* argmax, T* dx, const Pool2dShape& s) {
  for (int64_t i = 0; i < s.x_size(); ++i) dx[i] = T(0);
  for (int64_t plane = 0; plane < s.N * s.C; ++plane)
    for (int64_t i = 0; i < s.P * s.Q; ++i)
      dx[plane * s.H * s.W + argmax[plane * s.P * s.Q + i]] += dy[plane * s.P * s.Q + i];
}

}  // namespace brigade::ref

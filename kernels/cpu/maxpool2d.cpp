// See maxpool2d.h. Two paths per plane: 2x2 windows at stride 2 without padding (disjoint
// windows, all inside the plane: the question's pools), with a loop free of clipping and a
// backward that writes every cell once instead of zeroing and scattering, in AVX-512 where
// kernel_isa() says so; and the general window walk for every other pool.
#include "kernels/cpu/maxpool2d.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/maxpool2d_avx512.h"

namespace brigade::cpu {

namespace {

// Every window inside the plane: no leading padding, and none at the end either ("same" pads
// there when the size is odd).
bool is_2x2_stride_2(const Pool2dShape& s) {
  return s.R == 2 && s.S == 2 && s.stride == 2 && s.pad_h == 0 && s.pad_w == 0 &&
         2 * s.P <= s.H && 2 * s.Q <= s.W;
}

// Whether v takes the place of m, the window's maximum so far: v is larger, or v is the
// window's first NaN (maxpool2d.h's NaN rule; `v > m` is false whenever either is NaN).
inline bool replaces_max(float v, float m) { return v > m || (std::isnan(v) && !std::isnan(m)); }

// The general walk: the window clipped to the plane, in row-major order (the first maximum,
// or the first NaN, stays).
void forward_plane(const float* xp, float* yp, int32_t* ap, const Pool2dShape& s) {
  for (int64_t p = 0; p < s.P; ++p) {
    const int64_t h0 = std::max<int64_t>(p * s.stride - s.pad_h, 0);
    const int64_t h1 = std::min<int64_t>(p * s.stride - s.pad_h + s.R, s.H);
    for (int64_t q = 0; q < s.Q; ++q) {
      const int64_t w0 = std::max<int64_t>(q * s.stride - s.pad_w, 0);
      const int64_t w1 = std::min<int64_t>(q * s.stride - s.pad_w + s.S, s.W);
      int64_t best = h0 * s.W + w0;
      float m = xp[best];
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w)
          if (replaces_max(xp[h * s.W + w], m)) {
            m = xp[h * s.W + w];
            best = h * s.W + w;
          }
      yp[p * s.Q + q] = m;
      ap[p * s.Q + q] = static_cast<int32_t>(best);
    }
  }
}

// 2x2, stride 2: the window's four cells in the same order, no clipping. Numbers first
// (strictly greater replaces); then one test for a NaN among the four, rare, which makes the
// window's first NaN the winner instead (replaces_max at each step ran this loop 1.3x slower).
void forward_plane_2x2(const float* xp, float* yp, int32_t* ap, const Pool2dShape& s) {
  for (int64_t p = 0; p < s.P; ++p) {
    const float* r0 = xp + 2 * p * s.W;
    const float* r1 = r0 + s.W;
    for (int64_t q = 0; q < s.Q; ++q) {
      const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
      float m = a;
      int64_t at = 0;
      if (b > m) m = b, at = 1;
      if (c > m) m = c, at = s.W;
      if (d > m) m = d, at = s.W + 1;
      if (std::isunordered(a, b) || std::isunordered(c, d)) [[unlikely]] {
        at = std::isnan(a) ? 0 : std::isnan(b) ? 1 : std::isnan(c) ? s.W : s.W + 1;
        m = std::isnan(a) ? a : std::isnan(b) ? b : std::isnan(c) ? c : d;
      }
      yp[p * s.Q + q] = m;
      ap[p * s.Q + q] = static_cast<int32_t>(2 * p * s.W + 2 * q + at);
    }
  }
}

// The window's gradient, with the ReLU mask of maxpool2d.h when yp is given: relu_backward's
// own test and its 0.0f.
inline float window_grad(const float* dyp, const float* yp, int64_t i) {
  return !yp || yp[i] > 0.0f ? dyp[i] : 0.0f;
}

void backward_plane(const float* dyp, const int32_t* ap, float* dxp, const Pool2dShape& s,
                    const float* yp) {
  std::fill(dxp, dxp + s.H * s.W, 0.0f);
  for (int64_t i = 0; i < s.P * s.Q; ++i) dxp[ap[i]] += window_grad(dyp, yp, i);
}

// Disjoint windows: each cell is written once, 0 + dy for its window's winner (the reference's
// "zero, then add" bits: -0 becomes +0), 0 for the others and for cells no window covers.
void backward_plane_2x2(const float* dyp, const int32_t* ap, float* dxp, const Pool2dShape& s,
                        const float* yp) {
  for (int64_t p = 0; p < s.P; ++p) {
    float* r0 = dxp + 2 * p * s.W;
    float* r1 = r0 + s.W;
    for (int64_t q = 0; q < s.Q; ++q) {
      const float g = 0.0f + window_grad(dyp, yp, p * s.Q + q);
      const int64_t at = ap[p * s.Q + q] - (2 * p * s.W + 2 * q);
      r0[2 * q] = at == 0 ? g : 0.0f;
      r0[2 * q + 1] = at == 1 ? g : 0.0f;
      r1[2 * q] = at == s.W ? g : 0.0f;
      r1[2 * q + 1] = at == s.W + 1 ? g : 0.0f;
    }
    for (int64_t w = 2 * s.Q; w < s.W; ++w) r0[w] = r1[w] = 0.0f;
  }
  std::fill(dxp + 2 * s.P * s.W, dxp + s.H * s.W, 0.0f);
}

}  // namespace

void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,
                       ThreadPool& pool) {
  const int64_t HW = s.H * s.W, PQ = s.P * s.Q;
  auto plane_fn = !is_2x2_stride_2(s)          ? forward_plane
                  : kernel_isa() == Isa::avx512 ? avx512::maxpool2x2_forward_plane
                                                : forward_plane_2x2;
  pool.parallel_for(s.N * s.C, [&](int64_t plane0, int64_t plane1) {
    for (int64_t plane = plane0; plane < plane1; ++plane)
      plane_fn(x + plane * HW, y + plane * PQ, argmax + plane * PQ, s);
  }, 4);
}

void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s,
                        ThreadPool& pool, const float* relu_y) {
  const int64_t HW = s.H * s.W, PQ = s.P * s.Q;
  auto plane_fn = !is_2x2_stride_2(s)          ? backward_plane
                  : kernel_isa() == Isa::avx512 ? avx512::maxpool2x2_backward_plane
                                                : backward_plane_2x2;
  // Planes are independent, so the scatter-add never races.
  pool.parallel_for(s.N * s.C, [&](int64_t plane0, int64_t plane1) {
    for (int64_t plane = plane0; plane < plane1; ++plane)
      plane_fn(dy + plane * PQ, argmax + plane * PQ, dx + plane * HW, s,
               relu_y ? relu_y + plane * PQ : nullptr);
  }, 4);
}

}  // namespace brigade::cpu

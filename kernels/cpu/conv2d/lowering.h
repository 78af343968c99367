// The im2col lowering of Conv2D and its adjoint, with the index walk both share (internal to
// kernels/cpu; conv2d.h exposes the one-sample forms). im2col exists twice: the portable loop
// and an AVX-512 one (avx512.cpp), 2-3x faster on unpadded stride-1 shapes; im2col_ld
// picks one by kernel_isa(). col2im is portable only: AVX-512 versions measured slower (a
// scatter's wide read-modify-writes overlap at one-float offsets and stall on store forwarding;
// a gather reads R·S col rows at once).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/shapes.h"

namespace brigade::cpu::lowering {

// The output columns q whose input column q·stride - pad_w + t lies inside [0, W).
inline void valid_columns(const Conv2dShape& s, int64_t t, int64_t& lo, int64_t& hi) {
  const int64_t a = s.pad_w - t;                      // need q·stride >= a
  lo = a <= 0 ? 0 : (a + s.stride - 1) / s.stride;
  const int64_t b = s.W - 1 + s.pad_w - t;            // need q·stride <= b
  hi = b < 0 ? 0 : std::min<int64_t>(s.Q, b / s.stride + 1);
  lo = std::min(lo, hi);
}

// Calls row_fn(row, pq, inside, xo, q_lo, q_hi) for every (c, r, t, p): the shared index
// walk of im2col and col2im. row = (c·R + r)·S + t is the col row, pq = p·Q the offset of
// output row p inside it; inside: whether input row h exists; output column q in
// [q_lo, q_hi) reads x[xo + q·stride] (xo itself may be negative: left padding).
template <class Fn>
inline void for_each_col_row(const Conv2dShape& s, Fn&& row_fn) {
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t t = 0; t < s.S; ++t) {
        int64_t lo, hi;
        valid_columns(s, t, lo, hi);
        const int64_t row = (c * s.R + r) * s.S + t;
        for (int64_t p = 0; p < s.P; ++p) {
          const int64_t h = p * s.stride - s.pad_h + r;
          row_fn(row, p * s.Q, h >= 0 && h < s.H, (c * s.H + h) * s.W - s.pad_w + t, lo, hi);
        }
      }
}

// im2col of one sample x (C, H, W) into columns [0, P·Q) of a col matrix (C·R·S, ld).
// `isa`: kernel_isa(), read once per convolution by the caller.
void im2col_ld(const float* x, float* col, int64_t ld, const Conv2dShape& s, Isa isa);
// The adjoint: dx (C, H, W) = the sum of col entries per pixel, over columns [0, P·Q).
void col2im_ld(const float* col, int64_t ld, float* dx, const Conv2dShape& s);

// im2col of a sample already rounded to bf16 (the bf16 convolution, bf16.h): the same walk
// as the portable loop, moving 2-byte values, so that col is never written in float.
void im2col_ld_bf16(const bf16* x, bf16* col, int64_t ld, const Conv2dShape& s);

// The two implementations behind im2col_ld, exposed so that each can be tested on its own.
void im2col_ld_portable(const float* x, float* col, int64_t ld, const Conv2dShape& s);
void im2col_ld_avx512(const float* x, float* col, int64_t ld, const Conv2dShape& s);

}  // namespace brigade::cpu::lowering

// See lowering.h: the portable im2col, col2im, and the choice of im2col.
#include "kernels/cpu/conv2d/lowering.h"

namespace brigade::cpu::lowering {

void im2col_ld_portable(const float* x, float* col, int64_t ld, const Conv2dShape& s) {
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    float* out = col + row * ld + pq;
    if (!inside) {
      std::fill(out, out + s.Q, 0.0f);
      return;
    }
    for (int64_t q = 0; q < lo; ++q) out[q] = 0.0f;
    for (int64_t q = hi; q < s.Q; ++q) out[q] = 0.0f;
    if (hi <= lo) return;
    const float* in = x + xo + lo * stride;  // the first pixel read: inside x
    float* o = out + lo;
    const int64_t n = hi - lo;
    if (stride == 1) {  // short rows: an inline loop the compiler vectorises beats memcpy calls
      for (int64_t q = 0; q < n; ++q) o[q] = in[q];
    } else {
      for (int64_t q = 0; q < n; ++q) o[q] = in[q * stride];
    }
  });
}

void col2im_ld(const float* col, int64_t ld, float* dx, const Conv2dShape& s) {
  std::fill(dx, dx + s.C * s.H * s.W, 0.0f);
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    if (!inside || hi <= lo) return;
    const float* __restrict in = col + row * ld + pq + lo;
    float* __restrict out = dx + xo + lo * stride;  // the first pixel written: inside dx
    const int64_t n = hi - lo;
    if (stride == 1) {  // the common case, spelled out so that it vectorises
      for (int64_t q = 0; q < n; ++q) out[q] += in[q];
    } else {
      for (int64_t q = 0; q < n; ++q) out[q * stride] += in[q];
    }
  });
}

void im2col_ld(const float* x, float* col, int64_t ld, const Conv2dShape& s, Isa isa) {
  if (isa == Isa::avx512)
    im2col_ld_avx512(x, col, ld, s);
  else
    im2col_ld_portable(x, col, ld, s);
}

}  // namespace brigade::cpu::lowering

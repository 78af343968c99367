// See lowering.h: the portable im2col, col2im, and the choice of im2col.
#include "kernels/cpu/conv2d/lowering.h"

namespace brigade::cpu::lowering {

namespace {
// The portable im2col for any element type: floats, or bf16 values copied as they are.
template <class T>
void im2col_ld_any(const T* x, T* col, int64_t ld, const Conv2dShape& s) {
  const int64_t stride = s.stride;
  const T zero{};
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo, int64_t hi) {
    T* out = col + row * ld + pq;
    if (!inside) {
      std::fill(out, out + s.Q, zero);
      return;
    }
    for (int64_t q = 0; q < lo; ++q) out[q] = zero;
    for (int64_t q = hi; q < s.Q; ++q) out[q] = zero;
    if (hi <= lo) return;
    const T* in = x + xo + lo * stride;  // the first pixel read: inside x
    T* o = out + lo;
    const int64_t n = hi - lo;
    if (stride == 1) {  // short rows: an inline loop the compiler vectorises beats memcpy calls
      for (int64_t q = 0; q < n; ++q) o[q] = in[q];
    } else {
      for (int64_t q = 0; q < n; ++q) o[q] = in[q * stride];
    }
  });
}
}  // namespace

void im2col_ld_portable(const float* x, float* col, int64_t ld, const Conv2dShape& s) {
  im2col_ld_any(x, col, ld, s);
}

void im2col_ld_bf16(const bf16* x, bf16* col, int64_t ld, const Conv2dShape& s) {
  im2col_ld_any(x, col, ld, s);
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

// See avx512.h. Every function here carries target("avx512f"), and the lambdas and
// templates it calls are inlined into it (flatten), so nothing compiled for AVX-512 runs
// unless kernel_isa() chose this path. Rows of Q floats are handled 16 at a time, the last
// block with a lane mask (masked loads never touch memory outside the mask).
#include "kernels/cpu/conv2d/avx512.h"

// GCC 12 warns that the _mm512_undefined_ps() inside some intrinsics (max, reduce) "may be used
// uninitialized" (GCC bug 105593, fixed in 13): a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/conv2d/lowering.h"

#define BRIGADE_AVX512 __attribute__((target("avx512f"), flatten))
// A lambda does not inherit its enclosing function's target: it says so itself.
#define BRIGADE_AVX512_LAMBDA __attribute__((target("avx512f")))

namespace brigade::cpu {

namespace lowering {

using avx512::first_lanes;

BRIGADE_AVX512 void im2col_ld_avx512(const float* x, float* col, int64_t ld, const Conv2dShape& s) {
  if (s.stride != 1) {  // strided reads do not vectorise; the portable loop, compiled here
    im2col_ld_portable(x, col, ld, s);
    return;
  }
  if (s.pad_h == 0 && s.pad_w == 0) {  // no padding: every row is a plain copy of Q floats
    const int64_t HW = s.H * s.W;
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t r = 0; r < s.R; ++r)
        for (int64_t t = 0; t < s.S; ++t) {
          const float* in = x + c * HW + r * s.W + t;
          float* out = col + ((c * s.R + r) * s.S + t) * ld;
          for (int64_t p = 0; p < s.P; ++p, in += s.W, out += s.Q) {
            int64_t q = 0;
            for (; q + 16 <= s.Q; q += 16) _mm512_storeu_ps(out + q, _mm512_loadu_ps(in + q));
            if (q < s.Q) {
              const __mmask16 m = first_lanes(s.Q - q);
              _mm512_mask_storeu_ps(out + q, m, _mm512_maskz_loadu_ps(m, in + q));
            }
          }
        }
    return;
  }
  for_each_col_row(s, [&](int64_t row, int64_t pq, bool inside, int64_t xo, int64_t lo,
                          int64_t hi) BRIGADE_AVX512_LAMBDA {
    float* out = col + row * ld + pq;
    if (!inside) lo = hi = s.Q;  // the whole row is padding
    for (int64_t q = 0; q < lo; ++q) out[q] = 0.0f;
    for (int64_t q = hi; q < s.Q; ++q) out[q] = 0.0f;
    const float* in = x + xo;  // in[q] for q in [lo, hi): inside x
    for (int64_t q = lo; q < hi; q += 16) {
      const __mmask16 m = first_lanes(hi - q);
      _mm512_mask_storeu_ps(out + q, m, _mm512_maskz_loadu_ps(m, in + q));
    }
  });
}

}  // namespace lowering

namespace avx512 {

namespace {
// Output row p, columns [q, q + 16) under mask m, of KB consecutive filters k0.. : the taps
// read once each, every tap feeding KB accumulators.
template <int KB>
BRIGADE_AVX512 inline void forward_block(const float* xs, int64_t ld_x, const float* w,
                                         const float* b, float* y, const Conv2dShape& s,
                                         bool relu, int64_t k0, int64_t p, int64_t q, __mmask16 m) {
  const int64_t RS = s.R * s.S;
  __m512 acc[KB];
  for (int j = 0; j < KB; ++j) acc[j] = _mm512_set1_ps(b ? b[k0 + j] : 0.0f);
  for (int64_t r = 0; r < s.R; ++r)
    for (int64_t t = 0; t < s.S; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, xs + (p + r) * ld_x + q + t);
      const float* wt = w + k0 * RS + r * s.S + t;
      for (int j = 0; j < KB; ++j) acc[j] = _mm512_fmadd_ps(xv, _mm512_set1_ps(wt[j * RS]), acc[j]);
    }
  for (int j = 0; j < KB; ++j) {
    // max(0, v), in that order: vmaxps returns its second operand when either is NaN, so a
    // NaN passes through the ReLU as it does in std::max(v, 0) (a NaN must reach the
    // pipeline's finiteness check, not turn into 0).
    const __m512 v = relu ? _mm512_max_ps(_mm512_setzero_ps(), acc[j]) : acc[j];
    _mm512_mask_storeu_ps(y + ((k0 + j) * s.P + p) * s.Q + q, m, v);
  }
}

constexpr int kFilters = 8;  // filters per block: 8 accumulators, one input load per 8 FMAs
}  // namespace

BRIGADE_AVX512 void conv1ch_forward(const float* xs, int64_t ld_x, const float* w, const float* b,
                                    float* y, const Conv2dShape& s, bool relu) {
  for (int64_t p = 0; p < s.P; ++p)
    for (int64_t q = 0; q < s.Q; q += 16) {
      const __mmask16 m = first_lanes(s.Q - q);
      int64_t k0 = 0;
      for (; k0 + kFilters <= s.K; k0 += kFilters)
        forward_block<kFilters>(xs, ld_x, w, b, y, s, relu, k0, p, q, m);
      for (; k0 < s.K; ++k0) forward_block<1>(xs, ld_x, w, b, y, s, relu, k0, p, q, m);
    }
}

BRIGADE_AVX512 void bias_sums(const float* dy, float* db, const Conv2dShape& s, int64_t k0,
                              int64_t k1) {
  const int64_t PQ = s.P * s.Q;
  const __mmask16 tail = first_lanes(PQ % 16);
  for (int64_t k = k0; k < k1; ++k) {
    __m512 lanes = _mm512_setzero_ps();
    for (int64_t n = 0; n < s.N; ++n) {
      const float* row = dy + (n * s.K + k) * PQ;
      int64_t i = 0;
      for (; i + 16 <= PQ; i += 16) lanes = _mm512_add_ps(lanes, _mm512_loadu_ps(row + i));
      // only the tail's lanes change (adding 0 elsewhere could turn a -0 into +0)
      if (tail)
        lanes = _mm512_mask_add_ps(lanes, tail, lanes, _mm512_maskz_loadu_ps(tail, row + i));
    }
    float l[16];
    _mm512_storeu_ps(l, lanes);
    for (int width = 8; width >= 1; width /= 2)
      for (int j = 0; j < width; ++j) l[j] += l[j + width];
    db[k] += l[0];
  }
}

}  // namespace avx512
}  // namespace brigade::cpu

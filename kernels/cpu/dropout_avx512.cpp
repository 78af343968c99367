// See dropout_avx512.h. One Philox counter per lane: the arithmetic of engine/philox.h on 16
// counters at once, 32x32->64-bit products included, then the 64 words transposed into
// element order.
#include "kernels/cpu/dropout_avx512.h"

// GCC 12 warns that the _mm512_undefined_epi32() inside the shift intrinsics is used
// uninitialised (GCC bug 105593, fixed in 13): a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "engine/philox.h"

#define BRIGADE_AVX512 __attribute__((target("avx512f"), flatten))

namespace brigade::cpu::avx512 {

namespace {
// The high and low 32 bits of m * c, lane by lane (vpmuludq takes the even lanes; the odd
// ones are shifted down to take their turn).
BRIGADE_AVX512 inline void mul_hi_lo(__m512i m, __m512i c, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(c, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

}  // namespace

BRIGADE_AVX512 void dropout_block(const float* x, float* y, int64_t e, uint32_t sample,
                                  uint32_t layer, uint32_t step, uint32_t k0, uint32_t k1,
                                  float rate, float scale) {
  using namespace philox_detail;
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(e / 4)),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                  14, 15));
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(sample));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(layer));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(step));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kM1));
  for (int r = 0; r < 10; ++r) {  // philox_detail::round, the key bumped between rounds
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    __m512i hi0, lo0, hi1, lo1;
    mul_hi_lo(m0, c0, hi0, lo0);
    mul_hi_lo(m1, c2, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
  }
  // Lane i of word j is element 4i + j: a 4x4 transpose within each 128-bit block, then one
  // of the blocks, gives the 64 words in element order, 16 per register.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  // Element block b (elements 16b .. 16b + 15) is block b of u0, u1, u2, u3.
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i v1 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i v3 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i words[4] = {_mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)),
                            _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(3, 1, 3, 1))};
  // philox_uniform: the top 24 bits times 2^-24 (exact); kept where >= rate.
  for (int b = 0; b < 4; ++b) {
    const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(words[b], 8)),
                                   _mm512_set1_ps(1.0f / 16777216.0f));
    const __mmask16 keep = _mm512_cmp_ps_mask(u, _mm512_set1_ps(rate), _CMP_GE_OQ);
    const float* xb = x + e + 16 * b;
    _mm512_storeu_ps(y + e + 16 * b,
                     _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(xb), _mm512_set1_ps(scale)));
  }
}

}  // namespace brigade::cpu::avx512

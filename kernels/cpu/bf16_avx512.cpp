// See bf16_avx512.h. Every function here carries the AVX-512 BF16 target attribute.
#include "kernels/cpu/bf16_avx512.h"

// GCC 12 warns that the _mm512_undefined_*() inside the shift and widening intrinsics are used
// uninitialised (GCC bug 105593, fixed in 13): a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/gemm_bf16.h"

#define BRIGADE_AVX512_BF16 __attribute__((target("avx512f,avx512bf16"), flatten))

namespace brigade::cpu::avx512 {

namespace {
// Lanes holding a float denormal: exponent bits 0, mantissa bits not (zeros are fine).
BRIGADE_AVX512_BF16 inline __mmask16 denormal_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_test_epi32_mask(tiny, u, _mm512_set1_epi32(0x007FFFFF));
}
}  // namespace

BRIGADE_AVX512_BF16 void float_to_bf16(const float* x, bf16* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    if ((denormal_lanes(lo) | denormal_lanes(hi)) == 0) {
      const __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);  // lanes 0..15 from lo, 16..31 from hi
      _mm512_storeu_si512(y + i, reinterpret_cast<const __m512i&>(h));
    } else {
      // vcvtne2ps2bf16 would flush the denormals to ±0: round these 32 one by one instead.
      for (int64_t j = i; j < i + 32; ++j) y[j] = to_bf16(x[j]);
    }
  }
  for (; i < n; ++i) y[i] = to_bf16(x[i]);
}

BRIGADE_AVX512_BF16 void bf16_to_float(const bf16* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) y[i] = to_float(x[i]);
}

BRIGADE_AVX512_BF16 void gemm_bf16_tile(const uint32_t* a_panel, const uint32_t* b_panel,
                                        int64_t pairs, float* tile) {
  constexpr int kRows = static_cast<int>(kGemmBf16TileRows);
  static_assert(kGemmBf16TileCols == 32, "two 16-lane vectors per row");
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i b0 = _mm512_loadu_si512(b_panel), b1 = _mm512_loadu_si512(b_panel + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(a_panel[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], reinterpret_cast<const __m512bh&>(a),
                                   reinterpret_cast<const __m512bh&>(b0));
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], reinterpret_cast<const __m512bh&>(a),
                                   reinterpret_cast<const __m512bh&>(b1));
    }
    a_panel += kRows;
    b_panel += 32;
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(tile + r * 32, acc[r][0]);
    _mm512_storeu_ps(tile + r * 32 + 16, acc[r][1]);
  }
}

}  // namespace brigade::cpu::avx512

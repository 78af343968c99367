// See maxpool2d_avx512.h. Each output row is handled 16 outputs at a time: the 32 input
// floats of a row under them are loaded as two vectors and split into their even and odd
// columns (vpermt2ps), so that the four cells of 16 windows sit in four vectors, compared in
// the reference's window order. The last block of a row is masked (masked loads never touch
// memory outside the mask).
#include "kernels/cpu/maxpool2d_avx512.h"

#include <immintrin.h>

#include "kernels/cpu/avx512_lanes.h"

#define BRIGADE_AVX512 __attribute__((target("avx512f"), flatten))

namespace brigade::cpu::avx512 {

BRIGADE_AVX512 void maxpool2x2_forward_plane(const float* xp, float* yp, int32_t* ap,
                                             const Pool2dShape& s) {
  const int32_t W = static_cast<int32_t>(s.W);
  for (int64_t p = 0; p < s.P; ++p) {
    const float* row0 = xp + 2 * p * s.W;
    const float* row1 = row0 + s.W;
    for (int64_t q = 0; q < s.Q; q += 16) {
      const int64_t n = s.Q - q < 16 ? s.Q - q : 16;  // outputs in this block
      const __mmask16 lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
      const float* in0 = row0 + 2 * q;
      const float* in1 = row1 + 2 * q;
      const __m512 lo0 = _mm512_maskz_loadu_ps(lo, in0), hi0 = _mm512_maskz_loadu_ps(hi, in0 + 16);
      const __m512 lo1 = _mm512_maskz_loadu_ps(lo, in1), hi1 = _mm512_maskz_loadu_ps(hi, in1 + 16);
      // The window's cells in row-major order: a b / c d.
      const __m512 a = _mm512_permutex2var_ps(lo0, even_lanes(), hi0);
      const __m512 b = _mm512_permutex2var_ps(lo0, odd_lanes(), hi0);
      const __m512 c = _mm512_permutex2var_ps(lo1, even_lanes(), hi1);
      const __m512 d = _mm512_permutex2var_ps(lo1, odd_lanes(), hi1);
      // A cell replaces the maximum so far where it is larger or the window's first NaN
      // (maxpool2d.h's NaN rule): "not <=" (unordered: true for a NaN), in the lanes whose
      // maximum is still a number. So the first maximum, or the first NaN, stays.
      auto replaces = [](__m512 v, __m512 m) __attribute__((target("avx512f"))) {
        return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(m, m, _CMP_ORD_Q), v, m, _CMP_NLE_UQ);
      };
      __m512 m = a;
      __m512i offset = _mm512_setzero_si512();  // of the winner from the window's corner
      __mmask16 k = replaces(b, m);
      m = _mm512_mask_mov_ps(m, k, b);
      offset = _mm512_mask_mov_epi32(offset, k, _mm512_set1_epi32(1));
      k = replaces(c, m);
      m = _mm512_mask_mov_ps(m, k, c);
      offset = _mm512_mask_mov_epi32(offset, k, _mm512_set1_epi32(W));
      k = replaces(d, m);
      m = _mm512_mask_mov_ps(m, k, d);
      offset = _mm512_mask_mov_epi32(offset, k, _mm512_set1_epi32(W + 1));
      // The corner of window q + lane is cell 2p·W + 2(q + lane).
      const __m512i corner = _mm512_add_epi32(
          _mm512_set1_epi32(static_cast<int32_t>(2 * p * s.W + 2 * q)), even_lanes());
      const __mmask16 out = first_lanes(n);
      _mm512_mask_storeu_ps(yp + p * s.Q + q, out, m);
      _mm512_mask_storeu_epi32(ap + p * s.Q + q, out, _mm512_add_epi32(corner, offset));
    }
  }
}

BRIGADE_AVX512 void maxpool2x2_backward_plane(const float* dyp, const int32_t* ap, float* dxp,
                                              const Pool2dShape& s, const float* yp) {
  const int32_t W = static_cast<int32_t>(s.W);
  const __m512 zero = _mm512_setzero_ps();
  // Interleaving two 16-lane vectors (even, odd columns) back into 32 floats of a row.
  const __m512i first_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second_half =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t p = 0; p < s.P; ++p) {
    float* row0 = dxp + 2 * p * s.W;
    float* row1 = row0 + s.W;
    for (int64_t q = 0; q < s.Q; q += 16) {
      const int64_t n = s.Q - q < 16 ? s.Q - q : 16;
      const __mmask16 out = first_lanes(n);
      // Where the ReLU mask applies, dy counts only where y > 0 (ordered: not for NaN).
      __mmask16 live = out;
      if (yp)
        live = _mm512_mask_cmp_ps_mask(out, _mm512_maskz_loadu_ps(out, yp + p * s.Q + q), zero,
                                       _CMP_GT_OQ);
      // 0 + dy, as the reference's "zero, then add" gives (-0 becomes +0).
      const __m512 g = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(live, dyp + p * s.Q + q));
      const __m512i corner = _mm512_add_epi32(
          _mm512_set1_epi32(static_cast<int32_t>(2 * p * s.W + 2 * q)), even_lanes());
      const __m512i offset =
          _mm512_sub_epi32(_mm512_maskz_loadu_epi32(out, ap + p * s.Q + q), corner);
      auto cell = [&](int32_t at) __attribute__((target("avx512f"))) {
        return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(at)), g);
      };
      const __m512 a = cell(0), b = cell(1), c = cell(W), d = cell(W + 1);
      const __mmask16 lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
      _mm512_mask_storeu_ps(row0 + 2 * q, lo, _mm512_permutex2var_ps(a, first_half, b));
      _mm512_mask_storeu_ps(row0 + 2 * q + 16, hi, _mm512_permutex2var_ps(a, second_half, b));
      _mm512_mask_storeu_ps(row1 + 2 * q, lo, _mm512_permutex2var_ps(c, first_half, d));
      _mm512_mask_storeu_ps(row1 + 2 * q + 16, hi, _mm512_permutex2var_ps(c, second_half, d));
    }
    // An odd width leaves the last column of both rows to no window.
    for (int64_t w = 2 * s.Q; w < s.W; ++w) row0[w] = row1[w] = 0.0f;
  }
  // An odd height leaves the last row(s) to no window.
  for (int64_t i = 2 * s.P * s.W; i < s.H * s.W; ++i) dxp[i] = 0.0f;
}

}  // namespace brigade::cpu::avx512

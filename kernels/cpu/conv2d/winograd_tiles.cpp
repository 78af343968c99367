// See winograd_tiles.h. The matrices (Lavin & Gray):
//   Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   Aᵀ = [1 1 1 0; 0 1 -1 -1]
// Each transform is applied along the rows of a tile, then across them. In the AVX-512 forms
// lane i holds tile q + i; the even and odd columns of a row (2q, 2q + 1) are split out of
// two 16-float loads with vpermt2ps, and merged back the same way.
#include "kernels/cpu/conv2d/winograd_tiles.h"

#include <algorithm>

// GCC 12 warns that the _mm512_undefined_ps() inside _mm512_max_ps "may be used
// uninitialized" (GCC bug 105593, fixed in 13): a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/avx512_lanes.h"

#define BRIGADE_AVX512 __attribute__((target("avx512f")))

namespace brigade::cpu::winograd {
namespace {

// ---- portable: one tile at a time ----

void input_band_portable(const InputRows& in, float* v, int64_t ld, int64_t tw) {
  for (int64_t q = 0; q < tw; ++q) {
    float e[4][4];  // d B, row by row
    for (int a = 0; a < 4; ++a) {
      float d[4];
      for (int b = 0; b < 4; ++b) {
        const int64_t col = 2 * q + b - in.pad_w;
        d[b] = in.rows[a] && col >= 0 && col < in.W ? in.rows[a][col] : 0.0f;
      }
      e[a][0] = d[0] - d[2];
      e[a][1] = d[1] + d[2];
      e[a][2] = d[2] - d[1];
      e[a][3] = d[1] - d[3];
    }
    for (int b = 0; b < 4; ++b) {  // Bᵀ (d B)
      v[(0 * 4 + b) * ld + q] = e[0][b] - e[2][b];
      v[(1 * 4 + b) * ld + q] = e[1][b] + e[2][b];
      v[(2 * 4 + b) * ld + q] = e[2][b] - e[1][b];
      v[(3 * 4 + b) * ld + q] = e[1][b] - e[3][b];
    }
  }
}

// An output with its bias added: the ReLU (std::max(v, 0), in that order: a NaN passes
// through) or the mask, if any.
float finish(float v, const OutputRows& out, int64_t at) {
  if (out.relu) return std::max(v, 0.0f);
  if (out.mask) return out.mask[at] > 0.0f ? v : 0.0f;
  return v;
}

void output_band_portable(const float* m, int64_t ld, int64_t tw, const OutputRows& out) {
  for (int64_t q = 0; q < tw; ++q) {
    float a[2][4];  // Aᵀ M: rows m0 + m1 + m2 and m1 - m2 - m3
    for (int col = 0; col < 4; ++col) {
      const float m0 = m[(0 + col) * ld + q], m1 = m[(4 + col) * ld + q];
      const float m2 = m[(8 + col) * ld + q], m3 = m[(12 + col) * ld + q];
      a[0][col] = m0 + m1 + m2;
      a[1][col] = m1 - m2 - m3;
    }
    for (int64_t r = 0; r < out.rows; ++r) {  // (Aᵀ M) A
      const float even = a[r][0] + a[r][1] + a[r][2] + out.bias;
      const float odd = a[r][1] - a[r][2] - a[r][3] + out.bias;
      const int64_t at = r * out.Q + 2 * q;
      out.y0[at] = finish(even, out, at);
      if (2 * q + 1 < out.Q) out.y0[at + 1] = finish(odd, out, at + 1);
    }
  }
}

void gradient_band_portable(const float* dy0, int64_t rows, int64_t Q, float* dm, int64_t ld,
                            int64_t tw) {
  for (int64_t q = 0; q < tw; ++q) {
    float t[2][4];  // dY Aᵀ, row by row: (y0, y0 + y1, y0 - y1, -y1)
    for (int64_t r = 0; r < 2; ++r) {
      const float* row = dy0 + r * Q;
      const float even = r < rows ? row[2 * q] : 0.0f;
      const float odd = r < rows && 2 * q + 1 < Q ? row[2 * q + 1] : 0.0f;
      t[r][0] = even;
      t[r][1] = even + odd;
      t[r][2] = even - odd;
      t[r][3] = 0.0f - odd;
    }
    for (int b = 0; b < 4; ++b) {  // A (dY Aᵀ)
      dm[(0 * 4 + b) * ld + q] = t[0][b];
      dm[(1 * 4 + b) * ld + q] = t[0][b] + t[1][b];
      dm[(2 * 4 + b) * ld + q] = t[0][b] - t[1][b];
      dm[(3 * 4 + b) * ld + q] = 0.0f - t[1][b];
    }
  }
}

// ---- AVX-512: 16 tiles at a time ----

using avx512::even_lanes;
using avx512::first_lanes;
using avx512::odd_lanes;

// The lanes l of a 16-float load starting at column `first` that fall in [0, W): the others
// read as zero and touch no memory.
BRIGADE_AVX512 inline __mmask16 lanes_inside(int64_t first, int64_t W) {
  return static_cast<__mmask16>(first_lanes(W - first) & ~first_lanes(-first));
}

BRIGADE_AVX512 void input_band_avx512(const InputRows& in, float* v, int64_t ld, int64_t tw) {
  const __m512i even = even_lanes(), odd = odd_lanes();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t q = 0; q < tw; q += 16) {
    const __mmask16 m = first_lanes(tw - q);
    // Columns first .. first + 31 (d0, d1 of 16 tiles) and first + 2 .. first + 33 (d2, d3),
    // lanes outside the row masked off: the same four masks for the band's four rows.
    const int64_t first = 2 * q - in.pad_w;
    const int64_t cols[4] = {first, first + 16, first + 2, first + 18};
    __mmask16 inside[4];
    for (int i = 0; i < 4; ++i) inside[i] = lanes_inside(cols[i], in.W);
    __m512 e[4][4];
    for (int a = 0; a < 4; ++a) {
      __m512 d0 = zero, d1 = zero, d2 = zero, d3 = zero;
      if (const float* row = in.rows[a]) {
        __m512 part[4];  // a load with no lane inside is skipped: row + col may not exist
        for (int i = 0; i < 4; ++i)
          part[i] = inside[i] ? _mm512_maskz_loadu_ps(inside[i], row + cols[i]) : zero;
        d0 = _mm512_permutex2var_ps(part[0], even, part[1]);
        d1 = _mm512_permutex2var_ps(part[0], odd, part[1]);
        d2 = _mm512_permutex2var_ps(part[2], even, part[3]);
        d3 = _mm512_permutex2var_ps(part[2], odd, part[3]);
      }
      e[a][0] = _mm512_sub_ps(d0, d2);
      e[a][1] = _mm512_add_ps(d1, d2);
      e[a][2] = _mm512_sub_ps(d2, d1);
      e[a][3] = _mm512_sub_ps(d1, d3);
    }
    for (int b = 0; b < 4; ++b) {
      _mm512_mask_storeu_ps(v + (0 * 4 + b) * ld + q, m, _mm512_sub_ps(e[0][b], e[2][b]));
      _mm512_mask_storeu_ps(v + (1 * 4 + b) * ld + q, m, _mm512_add_ps(e[1][b], e[2][b]));
      _mm512_mask_storeu_ps(v + (2 * 4 + b) * ld + q, m, _mm512_sub_ps(e[2][b], e[1][b]));
      _mm512_mask_storeu_ps(v + (3 * 4 + b) * ld + q, m, _mm512_sub_ps(e[1][b], e[3][b]));
    }
  }
}

BRIGADE_AVX512 void output_band_avx512(const float* m, int64_t ld, int64_t tw,
                                       const OutputRows& out) {
  // even and odd outputs of 16 tiles -> columns 2q .. 2q + 15, then 2q + 16 .. 2q + 31
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  const __m512 bias = _mm512_set1_ps(out.bias), zero = _mm512_setzero_ps();
  for (int64_t q = 0; q < tw; q += 16) {
    const __mmask16 mt = first_lanes(tw - q);
    __m512 a[2][4];  // Aᵀ M: rows m0 + m1 + m2 and m1 - m2 - m3
    for (int col = 0; col < 4; ++col) {
      const __m512 m0 = _mm512_maskz_loadu_ps(mt, m + (0 + col) * ld + q);
      const __m512 m1 = _mm512_maskz_loadu_ps(mt, m + (4 + col) * ld + q);
      const __m512 m2 = _mm512_maskz_loadu_ps(mt, m + (8 + col) * ld + q);
      const __m512 m3 = _mm512_maskz_loadu_ps(mt, m + (12 + col) * ld + q);
      a[0][col] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
      a[1][col] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
    }
    for (int64_t r = 0; r < out.rows; ++r) {  // (Aᵀ M) A
      const __m512 even =
          _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), a[r][2]), bias);
      const __m512 odd =
          _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(a[r][1], a[r][2]), a[r][3]), bias);
      const __m512 halves[2] = {_mm512_permutex2var_ps(even, first, odd),
                                _mm512_permutex2var_ps(even, second, odd)};
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t at = r * out.Q + 2 * q + 16 * h;
        const __mmask16 mq = first_lanes(out.Q - (2 * q + 16 * h));
        __m512 val = halves[h];
        if (out.relu) {
          // max(0, v), in that order: vmaxps returns its second operand when either is NaN,
          // so a NaN passes through as it does in std::max(v, 0)
          val = _mm512_max_ps(zero, val);
        } else if (out.mask) {
          const __m512 x = _mm512_maskz_loadu_ps(mq, out.mask + at);
          val = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), val);
        }
        _mm512_mask_storeu_ps(out.y0 + at, mq, val);
      }
    }
  }
}

BRIGADE_AVX512 void gradient_band_avx512(const float* dy0, int64_t rows, int64_t Q, float* dm,
                                         int64_t ld, int64_t tw) {
  const __m512i even = even_lanes(), odd = odd_lanes();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t q = 0; q < tw; q += 16) {
    const __mmask16 mt = first_lanes(tw - q);
    __m512 t[2][4];  // dY Aᵀ, row by row: (y0, y0 + y1, y0 - y1, -y1)
    for (int64_t r = 0; r < 2; ++r) {
      __m512 e = zero, o = zero;
      if (r < rows) {  // columns 2q .. 2q + 31 of the row, zero from Q on
        const float* row = dy0 + r * Q + 2 * q;
        const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(Q - 2 * q), row);
        const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(Q - 2 * q - 16), row + 16);
        e = _mm512_permutex2var_ps(lo, even, hi);
        o = _mm512_permutex2var_ps(lo, odd, hi);
      }
      t[r][0] = e;
      t[r][1] = _mm512_add_ps(e, o);
      t[r][2] = _mm512_sub_ps(e, o);
      t[r][3] = _mm512_sub_ps(zero, o);
    }
    for (int b = 0; b < 4; ++b) {  // A (dY Aᵀ)
      _mm512_mask_storeu_ps(dm + (0 * 4 + b) * ld + q, mt, t[0][b]);
      _mm512_mask_storeu_ps(dm + (1 * 4 + b) * ld + q, mt, _mm512_add_ps(t[0][b], t[1][b]));
      _mm512_mask_storeu_ps(dm + (2 * 4 + b) * ld + q, mt, _mm512_sub_ps(t[0][b], t[1][b]));
      _mm512_mask_storeu_ps(dm + (3 * 4 + b) * ld + q, mt, _mm512_sub_ps(zero, t[1][b]));
    }
  }
}

}  // namespace

void input_band(const InputRows& in, float* v, int64_t ld, int64_t tw, bool avx512) {
  if (avx512) input_band_avx512(in, v, ld, tw);
  else input_band_portable(in, v, ld, tw);
}

void output_band(const float* m, int64_t ld, int64_t tw, const OutputRows& out, bool avx512) {
  if (avx512) output_band_avx512(m, ld, tw, out);
  else output_band_portable(m, ld, tw, out);
}

void gradient_band(const float* dy0, int64_t rows, int64_t Q, float* dm, int64_t ld, int64_t tw,
                   bool avx512) {
  if (avx512) gradient_band_avx512(dy0, rows, Q, dm, ld, tw);
  else gradient_band_portable(dy0, rows, Q, dm, ld, tw);
}

}  // namespace brigade::cpu::winograd

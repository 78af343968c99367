// Lane masks and permutation indices shared by the AVX-512 kernels (maxpool2d_avx512,
// conv2d/avx512, conv2d/winograd_tiles). Compiled for AVX-512F with a target attribute, like
// the kernels that call them: include only from files whose callers check kernel_isa().
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace brigade::cpu::avx512 {

// The lanes [0, n) of a 16-lane block, n clamped to [0, 16].
__attribute__((target("avx512f"))) inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1u);
}

// vpermt2ps indices: lane i <- element 2i (even) or 2i + 1 (odd) of the 32 floats (lo, hi),
// which splits a row's even and odd columns.
__attribute__((target("avx512f"))) inline __m512i even_lanes() {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
__attribute__((target("avx512f"))) inline __m512i odd_lanes() {
  return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

}  // namespace brigade::cpu::avx512

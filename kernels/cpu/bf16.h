// bfloat16: the upper 16 bits of a float32 (1 sign, 8 exponent, 7 mantissa bits).
//
// The same exponent range as float, 8 significant bits instead of 24: unit roundoff
// u = 2^-8 (float: 2^-24). Widening to float is exact (append 16 zero bits); narrowing
// rounds to nearest, ties to even, as PyTorch's c10::BFloat16 and TensorFlow do:
//   NaN        stays NaN, made quiet (mantissa bit 6 set), sign and upper payload kept;
//   ±Inf       stays ±Inf; a finite float above the largest bf16 (halfway or more) becomes Inf;
//   denormals  are rounded like any other value (0x00018000 -> 0x0002, 0x807fffff -> 0x8080),
//              never flushed to zero.
// The buffer conversions give these same bits on every path. On AVX-512 BF16 processors they
// use vcvtne2ps2bf16 (32 floats per instruction), which flushes denormal inputs to zero; the
// lanes holding one (rare: |x| < 2^-126) are redone in integer arithmetic (bf16_avx512.cpp).
#pragma once

#include <cstdint>
#include <cstring>

namespace brigade::cpu {

// A distinct type, so that bf16 data is never mistaken for a uint16_t count or index.
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float float_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Round to nearest, ties to even: add 0x7FFF, plus 1 when the kept part is odd, and drop the
// low 16 bits. A carry out of the mantissa bumps the exponent (which is right, up to Inf).
inline bf16 to_bf16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: truncate, set the quiet bit
    return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  const uint32_t odd = (u >> 16) & 1u;
  return bf16{static_cast<uint16_t>((u + 0x7FFFu + odd) >> 16)};
}

inline float to_float(bf16 h) { return float_from_bits(static_cast<uint32_t>(h.bits) << 16); }

// y[i] = to_bf16(x[i]) for i < n (AVX-512 BF16 where the processor has it: cpu_isa.h).
void float_to_bf16(const float* x, bf16* y, int64_t n);

// y[i] = to_float(x[i]) for i < n (vectorised on the same path as float_to_bf16).
void bf16_to_float(const bf16* x, float* y, int64_t n);

}  // namespace brigade::cpu

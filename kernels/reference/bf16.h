// bfloat16, the operand format of Dense and Conv2D in precision bf16 (kernels/precision.h):
// a float's sign, its 8 exponent bits and the top 7 of its 23 mantissa bits. The bf16
// kernels (kernels/cpu/dense_bf16.h, kernels/cpu/conv2d/bf16.h) round both GEMM operands so
// and accumulate in float; their references round the same inputs with round_to_bf16 and run
// the plain reference kernels in double.
//
// Rounding: to nearest, ties to EVEN (unlike TF32's ties away, tf32.h), worked out here on
// the value rather than on the bits, so that it checks kernels/cpu/bf16.h's bit trick instead
// of repeating it: the two bf16 neighbours of v are found by truncation, and the nearer one
// (the one with an even last bit on a tie) is taken, in double, where both distances are
// exact. Infinity and NaN pass unchanged; a finite value at or beyond the halfway point above
// the largest bf16 becomes infinity.
//   round_to_bf16(1 + 2^-8) = 1               (a tie: to the even neighbour, 1)
//   round_to_bf16(1 + 3·2^-8) = 1 + 2^-6      (a tie: to the even neighbour, 1 + 2^-6)
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace brigade::ref {

inline float round_to_bf16(float v) {
  if (!std::isfinite(v)) return v;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t down_bits = bits & 0xFFFF0000u;  // truncated toward zero: |down| <= |v|
  const float down = std::bit_cast<float>(down_bits);
  const uint32_t up_bits = down_bits + 0x10000u;  // the next bf16 away from zero (or Inf)
  const double up = (up_bits & 0x7FFFFFFFu) >= 0x7F800000u
                        ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(v))
                        : static_cast<double>(std::bit_cast<float>(up_bits));
  const double below = std::fabs(static_cast<double>(v) - down);
  const double above = std::fabs(up - static_cast<double>(v));
  const bool take_up = above < below || (above == below && ((down_bits >> 16) & 1u));
  if (!take_up) return down;
  return (up_bits & 0x7FFFFFFFu) >= 0x7F800000u
             ? std::copysign(std::numeric_limits<float>::infinity(), v)
             : std::bit_cast<float>(up_bits);
}

// Each value rounded to bf16 and widened to double: a bf16 reference's operands.
inline std::vector<double> bf16_operands(const std::vector<float>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = round_to_bf16(v[i]);
  return out;
}

}  // namespace brigade::ref

// TF32, the input format of tensor-core products in math mode tf32 (kernels/math_mode.h):
// a float's sign, its 8 exponent bits and the top 10 of its 23 mantissa bits. A tensor core
// reads each float operand of a GEMM or convolution as TF32 and accumulates the products in
// FP32; the emulated cuBLAS and cuDNN round their inputs with round_to_tf32 in that mode, and
// the tests' TF32 references round theirs with it too.
//
// Rounding: to nearest, ties away from zero — PTX's cvt.rna.tf32.f32, the conversion the
// libraries' kernels use. On the bits: add half of the dropped 13 bits' weight (2^12) to the
// magnitude, then clear them; a carry out of the mantissa moves to the next binade (and past
// the largest TF32, to infinity), as rounding should. Infinity and NaN pass unchanged (a NaN
// keeps a payload bit in the top 10, so it stays a NaN).
//   round_to_tf32(1 + 2^-11) = 1 + 2^-10       (a tie: away from zero)
//   round_to_tf32(1 + 2^-12) = 1               (below half: down)
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace brigade::ref {

inline float round_to_tf32(float v) {
  if (!std::isfinite(v)) return v;
  constexpr uint32_t kDropped = (1u << 13) - 1;  // the 13 low mantissa bits TF32 lacks
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  return std::bit_cast<float>((bits + (1u << 12)) & ~kDropped);
}

}  // namespace brigade::ref

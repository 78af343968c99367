// A float rounded to bf16 inside a kernel: kernels/cpu/bf16.h's to_bf16 (round to nearest, ties
// to even; NaN kept, made quiet; denormals kept) in integer arithmetic, so a GPU gives the CPU's
// bits for every input (CUDA's __float2bfloat16_rn would too on sm_80+, but its NaN payload is
// not specified; integers leave nothing to the hardware). bf16_values.cu's rounding, narrowing
// and widening kernels use it, and so does every hand-written kernel that rounds what it writes
// to bf16 values (precision bf16's layer boundaries fused into the kernel writing the tensor:
// kernels/ops.h, Bf16Rounding). Included by a .cu after kernels/emu/kernel.h.
#pragma once

#include <cstdint>

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// The upper 16 bits of x rounded to nearest, ties to even: add 0x7FFF, plus 1 when the kept
// part is odd, and drop the low 16 bits. NaN: truncated, its quiet bit set.
__device__ __forceinline__ uint16_t bf16_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t odd = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + odd) >> 16);
}

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// x rounded to the nearest bf16 value, kept in a float.
__device__ __forceinline__ float bf16_value(float x) { return bf16_to_float(bf16_bits(x)); }

// x rounded to bf16 values when `round` (a kernel's argument, the same for every thread), x
// itself otherwise.
__device__ __forceinline__ float bf16_value_if(bool round, float x) {
  return round ? bf16_value(x) : x;
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

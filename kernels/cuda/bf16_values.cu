// The bf16 value kernels: a float rounded to bf16 (kept as float, or narrowed to two bytes)
// and widened back, one element per thread of a grid-stride loop (launch.cuh). The rounding
// is kernels/cpu/bf16.h's to_bf16 in integer arithmetic (bf16_bits.cuh), so a GPU gives the
// CPU's bits for every input, NaN and denormals included.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void round_to_bf16_values_kernel(const float* x /* (n) */, float* y /* (n) */,
                                            int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = bf16_value(x[i]);
}

__global__ void narrow_to_bf16_kernel(const float* x /* (n) */, cpu::bf16* y /* (n) */,
                                      int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i].bits = bf16_bits(x[i]);
}

__global__ void widen_from_bf16_kernel(const cpu::bf16* x /* (n) */, float* y /* (n) */,
                                       int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = bf16_to_float(x[i].bits);
}

void round_to_bf16_values(const float* x, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "round_to_bf16_values: n = " << n << " is negative");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(round_to_bf16_values_kernel, elementwise_blocks(n), kElementwiseBlock, 0,
                 stream, BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

void narrow_to_bf16(const float* x, cpu::bf16* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "narrow_to_bf16: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(narrow_to_bf16_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

void widen_from_bf16(const cpu::bf16* x, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "widen_from_bf16: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(widen_from_bf16_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

// The pixel decode: a batch that crossed to the GPU as its bytes (1 per pixel instead of a
// float's 4) becomes the float32 images the first stage reads, one element per thread of a
// grid-stride loop (launch.cuh). Each element is kernels/pixels.h's pixel_value, the host
// decode's own function: float(b) / 255.0f, IEEE division rounded to nearest, which nvcc keeps
// as long as the build leaves out --use_fast_math and -prec-div=false (meson.build does) — so
// the GPU's floats are the host Batcher's, bit for bit.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/pixels.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void decode_pixels_kernel(const uint8_t* bytes /* (n) */, float* y /* (n) */,
                                     int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = pixel_value(bytes[i]);
}

void decode_pixels(const uint8_t* bytes, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "decode_pixels: n = " << n << " is negative");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(decode_pixels_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(bytes, n), BRIGADE_EXTENT(y, n), n);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

// Elementwise helpers: y += x, y *= a, y = a, y = x. The simplest kernels there are: thread
// t of the grid handles elements t, t + T, t + 2T, ... (launch.cuh's grid-stride loop).
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/launch.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void add_to_kernel(const float* x /* (n) */, float* y /* (n) */, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] += x[i];
}

__global__ void scale_kernel(float* y /* (n) */, float a, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] *= a;
}

__global__ void fill_kernel(float* y /* (n) */, float a, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = a;
}

__global__ void copy_kernel(const float* x /* (n) */, float* y /* (n) */, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = x[i];
}

void add_to(const float* x, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "add_to: n = " << n << " is negative");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(add_to_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

void scale(float* y, float a, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "scale: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(scale_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(y, n), a, n);
}

void fill(float* y, float a, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "fill: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(fill_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(y, n), a, n);
}

void copy(const float* x, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "copy: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(copy_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

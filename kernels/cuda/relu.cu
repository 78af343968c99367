// ReLU forward and backward, one element per thread of a grid-stride loop (launch.cuh).
// Backward tests the output y, not the input: y > 0 exactly where x > 0, and the layer may
// then overwrite its input in place.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void relu_forward_kernel(const float* x /* (n) */, float* y /* (n) */, int64_t n) {
  // NaN stays NaN (`x <= 0` is false for it), as on the CPU path and in PyTorch.
  for (int64_t i = grid_first(); i < n; i += grid_stride()) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

__global__ void relu_backward_kernel(const float* y /* (n) */, const float* dy /* (n) */,
                                     float* dx /* (n) */, int64_t n, bool round_bf16) {
  for (int64_t i = grid_first(); i < n; i += grid_stride())
    dx[i] = y[i] > 0.0f ? bf16_value_if(round_bf16, dy[i]) : 0.0f;
}

void relu_forward(const float* x, float* y, int64_t n, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "relu_forward: n = " << n << " is negative");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(relu_forward_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), BRIGADE_EXTENT(y, n), n);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, const Stream& stream,
                   bool round_bf16) {
  BRIGADE_CHECK(n >= 0, "relu_backward: n = " << n << " is negative");
  if (n == 0) return;
  BRIGADE_LAUNCH(relu_backward_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(y, n), BRIGADE_EXTENT(dy, n), BRIGADE_EXTENT(dx, n), n,
                 round_bf16);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

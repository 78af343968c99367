// ReLU (relu.cu): the contract of kernels/reference/relu.h — backward reads the OUTPUT y,
// the gradient at 0 is 0, in-place use is allowed. Two compilations: brigade::cuda (nvcc)
// and brigade::emu (the emulator); launches are asynchronous.
#pragma once

#include <cstdint>

namespace brigade {
class Stream;
}

#define BRIGADE_CUDA_RELU_LAUNCHERS                                                          \
  /* x, y: (n); y may alias x. y = max(x, 0). */                                             \
  void relu_forward(const float* x, float* y, int64_t n, const Stream& stream);              \
  /* y, dy, dx: (n); dx may alias dy. dx = y > 0 ? dy : 0. */                                \
  void relu_backward(const float* y, const float* dy, float* dx, int64_t n, const Stream& stream);

namespace brigade::emu {
BRIGADE_CUDA_RELU_LAUNCHERS
}  // namespace brigade::emu
#if defined(BRIGADE_HAVE_CUDA)
namespace brigade::cuda {
BRIGADE_CUDA_RELU_LAUNCHERS
}  // namespace brigade::cuda
#endif
#undef BRIGADE_CUDA_RELU_LAUNCHERS

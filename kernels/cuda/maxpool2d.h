// MaxPooling2D with argmax (maxpool2d.cu): the contract of kernels/reference/maxpool2d.h —
// argmax holds h·W + w inside the (H, W) plane; ties go to the FIRST maximum in row-major
// window order; cells in the padding never win. Bit-identical to the reference in float.
// Two compilations: brigade::cuda (nvcc) and brigade::emu (the emulator).
#pragma once

#include <cstdint>

#include "kernels/shapes.h"

namespace brigade {
class Stream;
}

#define BRIGADE_CUDA_MAXPOOL2D_LAUNCHERS                                                     \
  /* x: (N, C, H, W)  y, argmax: (N, C, P, Q) */                                              \
  void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,    \
                         const Stream& stream);                                              \
  /* dy, argmax: (N, C, P, Q)  dx: (N, C, H, W), overwritten */                               \
  void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx,                 \
                          const Pool2dShape& s, const Stream& stream);

namespace brigade::emu {
BRIGADE_CUDA_MAXPOOL2D_LAUNCHERS
}  // namespace brigade::emu
#if defined(BRIGADE_HAVE_CUDA)
namespace brigade::cuda {
BRIGADE_CUDA_MAXPOOL2D_LAUNCHERS
}  // namespace brigade::cuda
#endif
#undef BRIGADE_CUDA_MAXPOOL2D_LAUNCHERS

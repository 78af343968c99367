// MaxPooling2D, the fast CPU path: (n, c) planes split over the device's threads.
// Bit-identical to kernels/reference/maxpool2d.h, ties included (the first maximum in
// row-major window order wins) and NaNs (a window holding one outputs its first NaN, which
// takes the gradient); argmax holds h·W + w inside the (H, W) plane.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/shapes.h"

namespace brigade::cpu {

// x: (N, C, H, W)  y, argmax: (N, C, P, Q)
void maxpool2d_forward(const float* x, float* y, int32_t* argmax, const Pool2dShape& s,
                       ThreadPool& pool);

// dy, argmax: (N, C, P, Q)  dx: (N, C, H, W), overwritten
// relu_y: (N, C, P, Q) or nullptr. When the input was a ReLU's output, passing the pool's
// output y here also applies that ReLU's backward: each window's gradient counts only where
// y > 0 (the bits of relu_backward on dx: see layers/tape.cpp).
void maxpool2d_backward(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s,
                        ThreadPool& pool, const float* relu_y = nullptr);

}  // namespace brigade::cpu

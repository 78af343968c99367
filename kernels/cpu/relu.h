// ReLU, the fast CPU path; same contract as kernels/reference/relu.h (backward reads the
// output y; the gradient at 0 is 0; in-place use allowed).
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"

namespace brigade::cpu {

// x, y: (n); y may alias x
void relu_forward(const float* x, float* y, int64_t n, ThreadPool& pool);

// y, dy, dx: (n); dx may alias dy
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, ThreadPool& pool);

}  // namespace brigade::cpu

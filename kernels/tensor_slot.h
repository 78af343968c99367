// One tensor of a multi-tensor update (kernels/cuda/optimizers.cu): its pointers and length.
// An optimizer keeps a table of these in device memory, made once, so that one launch updates
// every parameter of a stage, or zeroes every gradient, and a step allocates nothing.
#pragma once

#include <cstdint>

namespace brigade {

struct TensorSlot {
  float* p = nullptr;        // (n): the tensor updated (a parameter, or a gradient zeroed)
  const float* g = nullptr;  // (n): its gradient (unused when zeroing)
  float* s1 = nullptr;       // (n): the optimizer's state: SGD's momentum buffer, Adam's m
  float* s2 = nullptr;       // (n): Adam's v (unused by SGD)
  int64_t n = 0;
};

}  // namespace brigade

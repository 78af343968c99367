// A step's verdict on a GPU: the finite check that writes a failure into a device's word
// (kernels/step_verdict.h: the words, ordered so that atomicMax keeps the failure the host
// reports; a fresh word is zeroed memory, kStepOk). The label check is the tally's launch
// (softmax.cu's tally_kernel). Read by the multi-tensor optimizers
// (optimizers.cu), which update nothing once a word holds a failure.
//
// The finite check is a grid-stride loop: a thread that finds a non-finite element writes
// the failure and stops (it is the same for every element; the first writer is enough).
#include <cmath>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/step_verdict.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void step_verdict_finite_kernel(const float* t /* (n) */, int64_t n,
                                           int32_t* word /* (1) */, int32_t failed) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    // NaN fails every comparison; an infinity is above the largest float.
    if (!(fabsf(t[i]) <= 3.402823466e38f)) {
      atomicMax(word, failed);
      return;
    }
  }
}

void step_verdict_check_finite(const float* t, int64_t n, int32_t* word, int32_t failed,
                               const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "step_verdict_check_finite: n = " << n << " is negative");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(step_verdict_finite_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(t, n), n, BRIGADE_EXTENT(word, 1), failed);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

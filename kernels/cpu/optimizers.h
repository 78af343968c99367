// SGD and Adam/AdamW updates, the fast CPU path: PyTorch's rules exactly as in
// kernels/reference/optimizers.h (same hyper-parameter structs), split over the device's
// threads in large contiguous ranges.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/optimizer_params.h"

namespace brigade::cpu {

// p, g, buf: (n); first_step: PyTorch initialises the momentum buffer to the first gradient.
void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, ThreadPool& pool);

// p, g, m, v: (n); step counts from 1.
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamParams& h,
                 int64_t step, ThreadPool& pool);

}  // namespace brigade::cpu

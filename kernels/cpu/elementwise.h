// Elementwise helpers for autodiff and the optimizers, the fast CPU path (same contracts as
// kernels/reference/elementwise.h), split over the device's threads in large ranges.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"

namespace brigade::cpu {

// x, y: (n). y += x (gradient accumulation).
void add_to(const float* x, float* y, int64_t n, ThreadPool& pool);
// y: (n). y *= a.
void scale(float* y, float a, int64_t n, ThreadPool& pool);
// y: (n). y = a.
void fill(float* y, float a, int64_t n, ThreadPool& pool);
// x, y: (n). y = x.
void copy(const float* x, float* y, int64_t n, ThreadPool& pool);

}  // namespace brigade::cpu

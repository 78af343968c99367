// See relu.h. Plain loops the compiler vectorises; split over threads in large grains.
#include "kernels/cpu/relu.h"

namespace brigade::cpu {

namespace {
constexpr int64_t kGrain = 1 << 15;  // elements per range: big enough to amortise a wake-up
}

void relu_forward(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];  // NaN stays
  }, kGrain);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }, kGrain);
}

}  // namespace brigade::cpu

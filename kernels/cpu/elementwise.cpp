// See elementwise.h. Each range runs the reference loop (already vectorisable) on float.
#include "kernels/cpu/elementwise.h"

#include "kernels/reference/elementwise.h"

namespace brigade::cpu {

namespace {
constexpr int64_t kGrain = 1 << 15;
}

void add_to(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { ref::add_to(x + i0, y + i0, i1 - i0); }, kGrain);
}

void scale(float* y, float a, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { ref::scale(y + i0, a, i1 - i0); }, kGrain);
}

void fill(float* y, float a, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { ref::fill(y + i0, a, i1 - i0); }, kGrain);
}

void copy(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { ref::copy(x + i0, y + i0, i1 - i0); }, kGrain);
}

}  // namespace brigade::cpu

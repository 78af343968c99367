// See bf16_values.h.
#include "kernels/cpu/bf16_values.h"

namespace brigade::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per range: big enough to amortise a wake-up
}

void round_to_bf16_values(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = to_float(to_bf16(x[i]));
  }, kGrain);
}

void narrow_to_bf16(const float* x, bf16* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { float_to_bf16(x + i0, y + i0, i1 - i0); },
                    kGrain);
}

void widen_from_bf16(const bf16* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { bf16_to_float(x + i0, y + i0, i1 - i0); },
                    kGrain);
}

}  // namespace brigade::cpu

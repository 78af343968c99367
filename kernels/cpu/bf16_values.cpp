// See bf16_values.h.
#include "kernels/cpu/bf16_values.h"

#include <atomic>
#include <cstring>

namespace brigade::cpu {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per range: big enough to amortise a wake-up
}

void round_to_bf16_values(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = to_float(to_bf16(x[i]));
  }, kGrain);
}

bool holds_bf16_values(const float* x, int64_t n, ThreadPool& pool) {
  std::atomic<bool> all{true};
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    if (!all.load(std::memory_order_relaxed)) return;  // another range found one already
    uint32_t low = 0;  // the OR of every low half: a loop the compiler vectorises
    for (int64_t i = i0; i < i1; ++i) {
      uint32_t u;
      std::memcpy(&u, x + i, sizeof u);
      low |= u & 0xFFFFu;
    }
    if (low != 0) all.store(false, std::memory_order_relaxed);
  }, kGrain);
  return all.load(std::memory_order_relaxed);
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

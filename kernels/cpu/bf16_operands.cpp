// See bf16_operands.h.
#include "kernels/cpu/bf16_operands.h"

#include <vector>

#include "engine/error.h"

namespace brigade::cpu {

bf16* bf16_buffer(int slot, int64_t n) {
  BRIGADE_CHECK(slot >= 0 && slot < kBf16OperandSlots && n >= 0,
                "bf16_buffer: slot " << slot << " of " << kBf16OperandSlots << ", " << n
                                     << " elements");
  thread_local std::vector<bf16> buffers[kBf16OperandSlots];
  std::vector<bf16>& buffer = buffers[slot];
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

void float_to_bf16(ThreadPool& pool, const float* x, bf16* y, int64_t n) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) { float_to_bf16(x + i0, y + i0, i1 - i0); },
                    1 << 14);
}

const bf16* rounded_to_bf16(int slot, const float* x, int64_t n, ThreadPool& pool) {
  bf16* out = bf16_buffer(slot, n);
  float_to_bf16(pool, x, out, n);
  return out;
}

}  // namespace brigade::cpu

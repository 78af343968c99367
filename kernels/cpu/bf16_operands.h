// GEMM operands rounded to bf16 for one call of a bf16 kernel (dense_bf16.h,
// conv2d/bf16.h), in buffers that belong to the calling thread and are kept for its lifetime
// (grown, never shrunk: a training step allocates nothing once they have their size).
// `slot` tells apart the operands of one call (x and w); a thread's next call reuses them.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/cpu/bf16.h"

namespace brigade::cpu {

inline constexpr int kBf16OperandSlots = 3;

// This thread's buffer `slot` (< kBf16OperandSlots), at least n elements.
bf16* bf16_buffer(int slot, int64_t n);

// y[i] = to_bf16(x[i]) for i < n, split over `pool` (elementwise: the same bits on any thread
// count).
void float_to_bf16(ThreadPool& pool, const float* x, bf16* y, int64_t n);

// x (n floats) rounded into this thread's buffer `slot`, the conversion split over `pool`
// (elementwise: the same bits on any thread count). Returns the buffer.
const bf16* rounded_to_bf16(int slot, const float* x, int64_t n, ThreadPool& pool);

}  // namespace brigade::cpu

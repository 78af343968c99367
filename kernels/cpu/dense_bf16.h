// Dense in precision bf16 (kernels/precision.h), the CPU path: the same three products as
// dense.h, each on bf16 operands with float accumulation (gemm_bf16.h).
//
// The rule, per pass: both operands of the GEMM are rounded to bf16 (to nearest, ties to
// even), the products summed in float; what the GEMM adds to (y's bias, dw's running sum
// across micro-batches) and what follows it (bias, ReLU) stay float.
//   forward          y  (N, out)  = bf16(x) · bf16(w)ᵀ, then + b, then ReLU      in float
//   backward-data    dx (N, in)   = bf16(dy) · bf16(w)
//   backward-weight  dw (out, in) += bf16(dy)ᵀ · bf16(x)                         dw float
//   backward-bias    db += column sums of dy: no GEMM, in float (dense.h's, unchanged)
// Kernels/reference computes the same thing with the operands rounded by round_to_bf16
// (kernels/reference/bf16.h) and summed in double.
//
// The rounded operands live in per-thread buffers (bf16_operands.h): no allocation once they
// have grown. gemm_bf16 splits C's rows or columns from the shape alone, so the bits do not
// depend on the thread count; nor on the ISA, as long as no partial sum is a float denormal.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"

namespace brigade::cpu {

// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out); relu fuses y = max(y, 0)
void dense_forward_bf16(const float* x, const float* w, const float* b, float* y, int64_t N,
                        int64_t in, int64_t out, ThreadPool& pool, bool relu = false);

// dy: (N, out)  w: (out, in)  dx: (N, in), overwritten
void dense_backward_data_bf16(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                              int64_t out, ThreadPool& pool);

// x: (N, in)  dy: (N, out)  dw: (out, in), accumulated (dw += bf16(dy)ᵀ · bf16(x))
void dense_backward_weight_bf16(const float* x, const float* dy, float* dw, int64_t N,
                                int64_t in, int64_t out, ThreadPool& pool);

}  // namespace brigade::cpu

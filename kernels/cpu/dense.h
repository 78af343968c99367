// Dense, the fast CPU path: y = x · Wᵀ + b, W stored [out, in] (PyTorch's layout), through
// SGEMM. Forward and backward-data cut the batch rows into chunks, backward-weight the output
// units, so no step needs a cross-thread reduction; the chunks depend on the shape alone
// (chunks.h), so the bits do not depend on the thread count.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"

namespace brigade::cpu {

// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out); relu fuses y = max(y, 0)
void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, ThreadPool& pool, bool relu = false);

// dy: (N, out)  w: (out, in)  dx: (N, in), overwritten
void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, ThreadPool& pool);

// x: (N, in)  dy: (N, out)  dw: (out, in), accumulated (dw += dyᵀ · x)
void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, ThreadPool& pool);

// dy: (N, out)  db: (out), accumulated (db += column sums of dy)
void dense_backward_bias(const float* dy, float* db, int64_t N, int64_t out, ThreadPool& pool);

}  // namespace brigade::cpu

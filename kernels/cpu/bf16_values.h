// Whole float tensors as bf16 values, for precision bf16's boundaries (kernels/precision.h):
// the activation and the input gradient at every layer boundary are rounded to bf16, and they
// cross between pipeline stages in bf16 storage. Elementwise, split over the device's pool in
// fixed grains: the same bits on any thread count, and the bits of to_bf16 / to_float
// (bf16.h) on every path.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/cpu/bf16.h"

namespace brigade::cpu {

// y[i] = to_float(to_bf16(x[i])) for i < n: x rounded to bf16, kept as float. y may be x.
void round_to_bf16_values(const float* x, float* y, int64_t n, ThreadPool& pool);

// True when every x[i] is a bf16 value already (its low 16 bits are 0), so that rounding would
// change nothing: a layer's input in a bf16 run is (layers/bf16_boundary.h). A NaN with those
// bits 0 counts too (rounding would only set its quiet bit; the result is NaN either way).
bool holds_bf16_values(const float* x, int64_t n, ThreadPool& pool);

// y[i] = to_bf16(x[i]): narrowing, exact when x holds bf16 values (above).
void narrow_to_bf16(const float* x, bf16* y, int64_t n, ThreadPool& pool);

// y[i] = to_float(x[i]): widening, always exact.
void widen_from_bf16(const bf16* x, float* y, int64_t n, ThreadPool& pool);

}  // namespace brigade::cpu

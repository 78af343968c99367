// Dropout, the fast CPU path: the same mask as kernels/reference/dropout.h (dropout_keep from
// engine/philox.h), so results are bit-identical to the reference in float. One Philox call
// yields the random words of four consecutive elements.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/dropout_mask.h"

namespace brigade::cpu {

// x, y: (batch, per_sample); row b is mini-batch sample sample_offset + b; y may alias x.
void dropout_forward(const float* x, float* y, int64_t batch, int64_t per_sample,
                     int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool);

// dy, dx: (batch, per_sample); the forward's mask, recomputed.
void dropout_backward(const float* dy, float* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool);

}  // namespace brigade::cpu

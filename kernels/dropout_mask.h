// The dropout mask: inverted dropout with a counter-based mask, the one definition that the
// reference (kernels/reference/dropout.h), the CPU and the CUDA kernels all draw from.
//
// Element e of mini-batch sample i is kept iff u >= rate, where u is a uniform in [0, 1) from
//   philox4x32_10(counter = {e / 4, i, layer, step}, key = {seed low, seed high}).v[e % 4]
// (see engine/philox.h). Kept elements are scaled by 1 / (1 - rate), so the expectation is
// unchanged and evaluation needs no rescaling. The mask is a pure function of (seed, step,
// layer, i, e): a micro-batch holding samples [offset, offset + batch) of the mini-batch
// draws exactly the rows the whole mini-batch would. Backward applies the same mask (it is
// recomputed, not stored). dropout_keep is __host__ __device__: kernels/cuda calls it too.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "engine/philox.h"

namespace brigade {

// What makes one layer's mask in one training step distinct from every other.
struct DropoutKey {
  uint64_t seed;   // the run's seed
  uint32_t step;   // the optimizer step (mini-batch number)
  uint32_t layer;  // the dropout layer's index in the model
};

BRIGADE_HD inline bool dropout_keep(const DropoutKey& key, uint32_t sample, uint32_t element,
                                    float rate) {
  const Philox4x32 r = philox4x32_10(element / 4, sample, key.layer, key.step,
                                     static_cast<uint32_t>(key.seed),
                                     static_cast<uint32_t>(key.seed >> 32));
  return philox_uniform(r.v[element % 4]) >= rate;
}

// Throws unless 0 <= rate < 1 (rate 1 would scale by infinity) and the indices fit 32 bits.
inline void check_dropout_args(float rate, int64_t sample_end, int64_t per_sample) {
  if (!(rate >= 0.0f && rate < 1.0f) || sample_end > (int64_t(1) << 32) ||
      per_sample > (int64_t(1) << 32)) {
    std::ostringstream m;
    m << "dropout: rate must be in [0, 1) and indices must fit 32 bits; got rate " << rate
      << ", samples up to " << sample_end << ", " << per_sample << " elements per sample";
    throw std::invalid_argument(m.str());
  }
}

}  // namespace brigade

// Dropout, the reference: inverted dropout with a counter-based mask.
//
// The mask itself — dropout_keep, a pure function of (seed, step, layer, sample, element) —
// is kernels/dropout_mask.h's; here it is applied in the obvious loops.
#pragma once

#include <cstdint>

#include "kernels/dropout_mask.h"  // DropoutKey, dropout_keep, check_dropout_args

namespace brigade {

namespace ref {

// x, y: (batch, per_sample), row b being mini-batch sample sample_offset + b; y may alias x.
template <class T>
void dropout_forward(const T* x, T* y, int64_t batch, int64_t per_sample, int64_t sample_offset,
                     float rate, const DropoutKey& key) {
  check_dropout_args(rate, sample_offset + batch, per_sample);
  const T scale = T(1) / (T(1) - T(rate));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t e = 0; e < per_sample; ++e) {
      const int64_t i = b * per_sample + e;
      const bool keep = dropout_keep(key, static_cast<uint32_t>(sample_offset + b),
                                     static_cast<uint32_t>(e), rate);
      y[i] = keep ? x[i] * scale : T(0);
    }
}

// dy, dx: (batch, per_sample); the same mask and scale as the forward with the same arguments.
template <class T>
void dropout_backward(const T* dy, T* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key) {
  dropout_forward(dy, dx, batch, per_sample, sample_offset, rate, key);
}

}  // namespace ref
}  // namespace brigade

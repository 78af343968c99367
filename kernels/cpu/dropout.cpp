// See dropout.h.
#include "kernels/cpu/dropout.h"

namespace brigade::cpu {

void dropout_forward(const float* x, float* y, int64_t batch, int64_t per_sample,
                     int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool) {
  check_dropout_args(rate, sample_offset + batch, per_sample);
  const float scale = 1.0f / (1.0f - rate);
  const uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint32_t sample = static_cast<uint32_t>(sample_offset + b);
      const float* xr = x + b * per_sample;
      float* yr = y + b * per_sample;
      for (int64_t e = 0; e < per_sample; e += 4) {
        // Counter {e/4, sample, layer, step}: word j belongs to element e + j.
        const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(e / 4), sample, key.layer,
                                           key.step, k0, k1);
        const int64_t lanes = per_sample - e < 4 ? per_sample - e : 4;
        for (int64_t j = 0; j < lanes; ++j)
          yr[e + j] = philox_uniform(r.v[j]) >= rate ? xr[e + j] * scale : 0.0f;
      }
    }
  }, 1);
}

void dropout_backward(const float* dy, float* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool) {
  dropout_forward(dy, dx, batch, per_sample, sample_offset, rate, key, pool);
}

}  // namespace brigade::cpu

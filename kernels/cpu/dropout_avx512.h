// Dropout's mask on AVX-512: 16 Philox counters side by side (called only when kernel_isa()
// is avx512). The same bits as dropout_keep of kernels/dropout_mask.h.
#pragma once

#include <cstdint>

namespace brigade::cpu::avx512 {

// y[e, e + 64) = x * scale where kept, else 0, for elements [e, e + 64) of one sample's row
// (e a multiple of 4: counters e/4 .. e/4 + 15 under the key (k0, k1)); y may alias x.
void dropout_block(const float* x, float* y, int64_t e, uint32_t sample, uint32_t layer,
                   uint32_t step, uint32_t k0, uint32_t k1, float rate, float scale);

}  // namespace brigade::cpu::avx512

// See bf16.h: the portable buffer conversions, and the choice of path.
#include "kernels/cpu/bf16.h"

#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/cpu_isa.h"

namespace brigade::cpu {

void float_to_bf16(const float* x, bf16* y, int64_t n) {
  if (use_avx512_bf16()) return avx512::float_to_bf16(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);
}

void bf16_to_float(const bf16* x, float* y, int64_t n) {
  if (use_avx512_bf16()) return avx512::bf16_to_float(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = to_float(x[i]);
}

}  // namespace brigade::cpu

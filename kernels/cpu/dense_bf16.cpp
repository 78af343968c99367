// See dense_bf16.h.
#include "kernels/cpu/dense_bf16.h"

#include <algorithm>

#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/gemm_bf16.h"

namespace brigade::cpu {

namespace {
enum Slot { kFirst = 0, kSecond = 1 };  // the two operands of one product
}

void dense_forward_bf16(const float* x, const float* w, const float* b, float* y, int64_t N,
                        int64_t in, int64_t out, ThreadPool& pool, bool relu) {
  const bf16* xr = rounded_to_bf16(kFirst, x, N * in, pool);    // (N, in)
  const bf16* wr = rounded_to_bf16(kSecond, w, out * in, pool);  // (out, in)
  gemm_bf16(pool, false, true, N, out, in, 1.0f, xr, in, wr, in, 0.0f, y, out);
  if (!b && !relu) return;
  pool.parallel_for(N, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float* row = y + n * out;  // (out)
      if (b)
        for (int64_t o = 0; o < out; ++o) row[o] += b[o];
      if (relu)
        for (int64_t o = 0; o < out; ++o) row[o] = std::max(row[o], 0.0f);
    }
  }, 16);
}

void dense_backward_data_bf16(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                              int64_t out, ThreadPool& pool) {
  const bf16* dyr = rounded_to_bf16(kFirst, dy, N * out, pool);  // (N, out)
  const bf16* wr = rounded_to_bf16(kSecond, w, out * in, pool);  // (out, in)
  gemm_bf16(pool, false, false, N, in, out, 1.0f, dyr, out, wr, in, 0.0f, dx, in);
}

void dense_backward_weight_bf16(const float* x, const float* dy, float* dw, int64_t N,
                                int64_t in, int64_t out, ThreadPool& pool) {
  const bf16* dyr = rounded_to_bf16(kFirst, dy, N * out, pool);  // (N, out)
  const bf16* xr = rounded_to_bf16(kSecond, x, N * in, pool);    // (N, in)
  gemm_bf16(pool, true, false, out, in, N, 1.0f, dyr, out, xr, in, 1.0f, dw, in);
}

}  // namespace brigade::cpu

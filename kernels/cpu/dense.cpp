// See dense.h.
#include "kernels/cpu/dense.h"

#include <algorithm>

#include "kernels/cpu/chunks.h"
#include "kernels/cpu/gemm.h"

namespace brigade::cpu {

namespace {
// Rows (or units) per chunk at least: enough that each SGEMM call is worth its overhead (each
// packs all of w again: 16 rows a chunk ran dense_1's forward and backward-data 10-30 %
// slower at batch 128). Chunks are cut from the shape alone (chunks.h), so every call has the
// same shape, and every output the same bits, on any thread count.
constexpr int64_t kRowGrain = 64;
}

void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, ThreadPool& pool, bool relu) {
  for_each_range(pool, N, kRowGrain, [&](int64_t n0, int64_t n1) {
    float* yr = y + n0 * out;
    sgemm(false, true, n1 - n0, out, in, 1.0f, x + n0 * in, in, w, in, 0.0f, yr, out);
    for (int64_t n = 0; n < n1 - n0; ++n) {
      float* row = yr + n * out;
      if (b)
        for (int64_t o = 0; o < out; ++o) row[o] += b[o];
      if (relu)
        for (int64_t o = 0; o < out; ++o) row[o] = std::max(row[o], 0.0f);
    }
  });
}

void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, ThreadPool& pool) {
  for_each_range(pool, N, kRowGrain, [&](int64_t n0, int64_t n1) {
    sgemm(false, false, n1 - n0, in, out, 1.0f, dy + n0 * out, out, w, in, 0.0f, dx + n0 * in,
          in);
  });
}

void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, ThreadPool& pool) {
  // Units [o0, o1): dw[o0:o1] (o1-o0, in) += dy[:, o0:o1]ᵀ (o1-o0, N) · x (N, in)
  for_each_range(pool, out, kRowGrain, [&](int64_t o0, int64_t o1) {
    sgemm(true, false, o1 - o0, in, N, 1.0f, dy + o0, out, x, in, 1.0f, dw + o0 * in, in);
  });
}

void dense_backward_bias(const float* dy, float* db, int64_t N, int64_t out, ThreadPool& pool) {
  // Each unit's sum runs over the batch in order, whichever range it falls in.
  pool.parallel_for(out, [&](int64_t o0, int64_t o1) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = o0; o < o1; ++o) db[o] += dy[n * out + o];
  }, 64);
}

}  // namespace brigade::cpu

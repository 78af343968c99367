// Helpers of the GEMM suites (ops_gemm_dense_test.cpp, ops_gemm_split_test.cpp): a product
// in double with its magnitudes, for the tolerances of ops_check.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace brigade::test {

struct GemmCase {
  int64_t M, N, K;
};

// op(A) · op(B) for row-major stored a, b (pitches lda, ldb) in double, and the sum of the
// products' magnitudes (for sum_tolerance): element (i, j) at i·N + j.
inline void reference_product(bool ta, bool tb, const GemmCase& c, const float* a, int64_t lda,
                              const float* b, int64_t ldb, std::vector<double>& sum,
                              std::vector<double>& magnitude) {
  sum.assign(static_cast<size_t>(c.M * c.N), 0.0);
  magnitude.assign(sum.size(), 0.0);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j)
      for (int64_t p = 0; p < c.K; ++p) {
        const double x = ta ? a[p * lda + i] : a[i * lda + p];
        const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum[i * c.N + j] += x * y;
        magnitude[i * c.N + j] += std::fabs(x * y);
      }
}

// The rest of a GEMM's reference after reference_product: sum and magnitude (element (i, j) at
// i·N + j) become alpha·op(A)·op(B) + beta·C0 and their magnitudes (C0 not read when beta is
// 0), and `packed` gets the kernel's C (pitch ldc) at the same places, for all_close.
inline void finish_reference(const GemmCase& c, float alpha, float beta, const float* c0,
                             const float* got, int64_t ldc, std::vector<double>& sum,
                             std::vector<double>& magnitude, std::vector<float>& packed) {
  packed.assign(sum.size(), 0.0f);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      const double cij = beta == 0.0f ? 0.0 : double{c0[i * ldc + j]};
      sum[i * c.N + j] = alpha * sum[i * c.N + j] + beta * cij;
      magnitude[i * c.N + j] = alpha * magnitude[i * c.N + j] + std::fabs(beta * cij);
      packed[i * c.N + j] = got[i * ldc + j];
    }
}

// The next multiple of 4 at or above n: a pitch that keeps every row 16-byte aligned.
inline int64_t aligned_pitch(int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace brigade::test

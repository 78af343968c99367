// Single-threaded SGEMM on row-major matrices: the one door to the BLAS.
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C,  op(A): (M, K), op(B): (K, N)
//
// It runs on the calling thread only (OpenBLAS's thread count pinned to 1): the kernels above
// split their work over the device's ThreadPool, so two virtual devices never oversubscribe
// the cores. Any number of threads may call it at once: the OpenBLAS linked (meson.build) is
// a build with locks, which the serial one is not.
#pragma once

#include <cstdint>

namespace brigade::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc);

}  // namespace brigade::cpu

// cuBLAS SGEMM for row-major matrices, and Dense on top of it.
//
// cuBLAS is column-major. A row-major (M, N) matrix C with row pitch ldc is, read
// column-major, the (N, M) matrix Cᵀ with leading dimension ldc. So instead of
//   C = op(A) · op(B)                  (row-major)
// we ask cuBLAS for
//   Cᵀ = op(B)ᵀ · op(A)ᵀ               (column-major: swap the operands and M with N)
// where B read column-major is already Bᵀ: op(B)ᵀ is "no transpose" of that view when op(B)
// = B, and "transpose" when op(B) = Bᵀ. Likewise A. No data is moved.
#include <cublas_v2.h>

#include <climits>
#include <cstdint>

#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"

namespace brigade::cuda::vendor {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const Stream& stream) {
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0 && lda >= a_cols && ldb >= b_cols && ldc >= N &&
                    lda >= 1 && ldb >= 1 && ldc >= 1,
                "sgemm (cuBLAS): invalid sizes (M, N, K) = (" << M << ", " << N << ", " << K
                    << "), trans_a " << trans_a << ", trans_b " << trans_b
                    << ", (lda, ldb, ldc) = (" << lda << ", " << ldb << ", " << ldc << ")");
  BRIGADE_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX &&
                    ldb <= INT_MAX && ldc <= INT_MAX,
                "sgemm (cuBLAS): sizes (M, N, K) = (" << M << ", " << N << ", " << K
                                                      << ") exceed cuBLAS's 32-bit int");
  if (M == 0 || N == 0) return;  // C is empty
  CublasLease blas(stream);
  BRIGADE_CUBLAS_CHECK(cublasSgemm(blas.handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                                   static_cast<int>(M), static_cast<int>(K), &alpha, B,
                                   static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C,
                                   static_cast<int>(ldc)));
}

namespace {
void check_dense(const char* op, int64_t N, int64_t in, int64_t out) {
  BRIGADE_CHECK(N >= 0 && in >= 1 && out >= 1,
                op << " (cuBLAS): invalid shape: batch " << N << ", in " << in << ", out " << out
                   << " (in and out must be positive)");
}
}  // namespace

// The same three products as dense.cu, through cuBLAS.
void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu) {
  check_dense("dense_forward", N, in, out);
  sgemm(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, stream);  // y = x · Wᵀ
  brigade::cuda::add_bias_rows(y, b, N, out, relu, stream);
}

void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, const Stream& stream) {
  check_dense("dense_backward_data", N, in, out);
  sgemm(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, stream);  // dx = dy · W
}

void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, const Stream& stream) {
  check_dense("dense_backward_weight", N, in, out);
  sgemm(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, stream);  // dw += dyᵀ · x
}

}  // namespace brigade::cuda::vendor

// cuBLAS SGEMM, and precision bf16's GEMM (cublasGemmEx on bfloat16 operands), for row-major
// matrices, and Dense on top of them.
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

namespace {
// A is stored (M, K), or (K, M) when transposed; B (K, N) or (N, K); each row at least that
// wide, and every size within cuBLAS's 32-bit int.
void check_gemm(const char* what, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0 && lda >= a_cols && ldb >= b_cols && ldc >= N &&
                    lda >= 1 && ldb >= 1 && ldc >= 1,
                what << " (cuBLAS): invalid sizes (M, N, K) = (" << M << ", " << N << ", " << K
                     << "), trans_a " << trans_a << ", trans_b " << trans_b
                     << ", (lda, ldb, ldc) = (" << lda << ", " << ldb << ", " << ldc << ")");
  BRIGADE_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX &&
                    ldb <= INT_MAX && ldc <= INT_MAX,
                what << " (cuBLAS): sizes (M, N, K) = (" << M << ", " << N << ", " << K
                     << ") exceed cuBLAS's 32-bit int");
}

int to_int(int64_t v) { return static_cast<int>(v); }  // after check_gemm
cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }
}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const Stream& stream) {
  check_gemm("sgemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;  // C is empty
  CublasLease blas(stream);
  BRIGADE_CUBLAS_CHECK(cublasSgemm(blas.handle(), op(trans_b), op(trans_a), to_int(N), to_int(M),
                                   to_int(K), &alpha, B, to_int(ldb), A, to_int(lda), &beta, C,
                                   to_int(ldc)));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const cpu::bf16* A, int64_t lda, const cpu::bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc, const Stream& stream) {
  check_gemm("gemm_bf16", trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;  // C is empty
  CublasLease blas(stream);
  // The default algorithm, in either of Brigade's math modes (the handle's, kernels/math_mode.h):
  // both let cuBLAS use tensor cores wherever the types allow, and bf16 inputs need no rounding
  // to reach them, so the two compute the same rule.
  BRIGADE_CUBLAS_CHECK(cublasGemmEx(blas.handle(), op(trans_b), op(trans_a), to_int(N), to_int(M),
                                    to_int(K), &alpha, B, CUDA_R_16BF, to_int(ldb), A,
                                    CUDA_R_16BF, to_int(lda), &beta, C, CUDA_R_32F, to_int(ldc),
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {
void check_dense(const char* op, int64_t N, int64_t in, int64_t out) {
  BRIGADE_CHECK(N >= 0 && in >= 1 && out >= 1,
                op << " (cuBLAS): invalid shape: batch " << N << ", in " << in << ", out " << out
                   << " (in and out must be positive)");
}

// The GEMM of an operand type: SGEMM for float, the bf16 GEMM for bfloat16.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const Stream& stream) {
  sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const cpu::bf16* A,
          int64_t lda, const cpu::bf16* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const Stream& stream) {
  gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}

// The same three products as dense.cu, through cuBLAS, on operands of type T.
template <class T>
void forward(const T* x, const T* w, const float* b, float* y, int64_t N, int64_t in,
             int64_t out, const Stream& stream, bool relu, bool round_bf16) {
  check_dense("dense_forward", N, in, out);
  gemm(false, true, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out, stream);  // y = x · Wᵀ
  brigade::cuda::add_bias_rows(y, b, N, out, relu, stream, round_bf16);
}

template <class T>
void backward_data(const T* dy, const T* w, float* dx, int64_t N, int64_t in, int64_t out,
                   const Stream& stream) {
  check_dense("dense_backward_data", N, in, out);
  gemm(false, false, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, stream);  // dx = dy · W
}

template <class T>
void backward_weight(const T* x, const T* dy, float* dw, int64_t N, int64_t in, int64_t out,
                     const Stream& stream) {
  check_dense("dense_backward_weight", N, in, out);
  gemm(true, false, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in, stream);  // dw += dyᵀ · x
}
}  // namespace

void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu) {
  forward(x, w, b, y, N, in, out, stream, relu, /*round_bf16=*/false);
}
void dense_forward(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu, bool round_bf16) {
  forward(x, w, b, y, N, in, out, stream, relu, round_bf16);
}

void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, const Stream& stream) {
  backward_data(dy, w, dx, N, in, out, stream);
}
void dense_backward_data(const cpu::bf16* dy, const cpu::bf16* w, float* dx, int64_t N,
                         int64_t in, int64_t out, const Stream& stream) {
  backward_data(dy, w, dx, N, in, out, stream);
}

void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, const Stream& stream) {
  backward_weight(x, dy, dw, N, in, out, stream);
}
void dense_backward_weight(const cpu::bf16* x, const cpu::bf16* dy, float* dw, int64_t N,
                           int64_t in, int64_t out, const Stream& stream) {
  backward_weight(x, dy, dw, N, in, out, stream);
}

}  // namespace brigade::cuda::vendor

// SGEMM with shared-memory tiles, transposes, alpha/beta and leading dimensions: the
// general form of lesson_matmul_tiled.cu, on which dense.cu and conv2d.cu are built.
//
//   C (M, N) = alpha · op(A) (M, K) · op(B) (K, N) + beta · C      (row-major, see gemm.h)
//
// Who computes what: block (bx, by) owns the kTile×kTile tile of C at rows by·kTile + [0,
// kTile), columns bx·kTile + [0, kTile); thread (tx, ty) owns C[by·kTile + ty][bx·kTile + tx].
// The block walks K one tile at a time: all its threads copy a kTile×kTile tile of op(A) and
// one of op(B) into shared memory (one element each), __syncthreads(), then every thread
// reads a row of the A tile and a column of the B tile from shared memory: each global
// element is loaded once per block instead of once per thread (kTile times less traffic).
//
// Coalescing: the 16 threads of a row (consecutive tx) should read consecutive addresses.
// For op(A) = A a thread loads A[row0 + ty][k0 + tx]: consecutive in tx. For op(A) = Aᵀ the
// same element of op(A) is A[k0 + tx][row0 + ty], lda apart from its neighbour's; so there
// thread (tx, ty) loads A[k0 + ty][row0 + tx] instead (consecutive in tx) and stores it at
// the transposed place of the tile, as[tx][ty]. Likewise for B. The tiles are kTile + 1
// wide so that writing down a column of a tile (the transposed case)
// hits 16 different shared-memory banks instead of one.
//
// Edges: loads outside op(A) or op(B) put 0 in the tile (adds nothing); threads outside C
// take part in loads and barriers but store nothing. So any M, N, K >= 0 works.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kTile = 16;  // 16×16 threads per block, one C element each

__global__ void gemm_tiled_kernel(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                  float alpha, const float* A, int64_t lda, const float* B,
                                  int64_t ldb, float beta, float* C, int64_t ldc) {
  __shared__ float as[kTile][kTile + 1];  // as[i][p] = op(A)[row0 + i][k0 + p]
  __shared__ float bs[kTile][kTile + 1];  // bs[p][j] = op(B)[k0 + p][col0 + j]
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;

  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    if (!trans_a) {  // op(A)[row0 + ty][k0 + tx] = A[row0 + ty][k0 + tx]
      const int64_t i = row0 + ty, p = k0 + tx;
      as[ty][tx] = (i < M && p < K) ? A[i * lda + p] : 0.0f;
    } else {         // op(A)[row0 + tx][k0 + ty] = A[k0 + ty][row0 + tx]
      const int64_t i = row0 + tx, p = k0 + ty;
      as[tx][ty] = (i < M && p < K) ? A[p * lda + i] : 0.0f;
    }
    if (!trans_b) {  // op(B)[k0 + ty][col0 + tx] = B[k0 + ty][col0 + tx]
      const int64_t p = k0 + ty, j = col0 + tx;
      bs[ty][tx] = (p < K && j < N) ? B[p * ldb + j] : 0.0f;
    } else {         // op(B)[k0 + tx][col0 + ty] = B[col0 + ty][k0 + tx]
      const int64_t p = k0 + tx, j = col0 + ty;
      bs[tx][ty] = (p < K && j < N) ? B[j * ldb + p] : 0.0f;
    }
    __syncthreads();  // both tiles are complete
    for (int p = 0; p < kTile; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();  // nobody overwrites a tile another thread still reads
  }

  const int64_t i = row0 + ty, j = col0 + tx;
  if (i < M && j < N) {
    float* c = C + i * ldc + j;
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;  // beta 0: C is not read
  }
}

// The elements a row-major (rows, cols) matrix with leading dimension ld spans: the last
// row needs only its first `cols`.
inline int64_t matrix_extent(int64_t rows, int64_t cols, int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

void gemm_tiled(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc, const Stream& stream) {
  // A is stored (M, K), or (K, M) when transposed; its rows must be at least that wide.
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0 && lda >= a_cols && ldb >= b_cols && ldc >= N &&
                    lda >= 1 && ldb >= 1 && ldc >= 1,
                "gemm_tiled: invalid sizes (M, N, K) = (" << M << ", " << N << ", " << K
                    << "), trans_a " << trans_a << ", trans_b " << trans_b << ", (lda, ldb, ldc) = ("
                    << lda << ", " << ldb << ", " << ldc << ")");
  BRIGADE_CHECK((N + kTile - 1) / kTile < (int64_t(1) << 31) && (M + kTile - 1) / kTile < 65536,
                "gemm_tiled: (M, N) = (" << M << ", " << N << ") exceeds the grid limits");
  if (M == 0 || N == 0) return;  // C is empty: a grid of zero blocks is an invalid launch
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile),
                  static_cast<unsigned>((M + kTile - 1) / kTile));
  const dim3 block(kTile, kTile);
  BRIGADE_LAUNCH(gemm_tiled_kernel, grid, block, 0, stream, trans_a, trans_b, M, N, K, alpha,
                 BRIGADE_EXTENT(A, matrix_extent(trans_a ? K : M, a_cols, lda)), lda,
                 BRIGADE_EXTENT(B, matrix_extent(trans_b ? N : K, b_cols, ldb)), ldb, beta,
                 BRIGADE_EXTENT(C, matrix_extent(M, N, ldc)), ldc);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

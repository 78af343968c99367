// C = A·B with shared-memory tiles: the third lesson of CUDA.
//
// Block (bx, by) computes the kTile×kTile tile of C at rows by·kTile.., columns bx·kTile..;
// thread (tx, ty) computes C[row][col] with row = by·kTile + ty, col = bx·kTile + tx.
// The K dimension is walked one tile at a time: the block's threads load a tile of A and a
// tile of B into shared memory together (each thread one element of each), synchronise,
// and each thread then reads kTile elements of each tile from shared memory instead of
// global memory: kTile times less global traffic than the naive kernel.
//
//            K                    N                          N
//     ┌─────────────┐      ┌───────────┐              ┌───────────┐
//   M │  As→ As→ As→│ · K  │ Bs        │      =     M │     C     │
//     └─────────────┘      │ ↓         │              └───────────┘
//                          └───────────┘
// Loads past the edge of A or B (sizes that are not multiples of kTile) load 0, which adds
// nothing; threads past the edge of C take part in the loads and barriers but write nothing.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kTile = 16;  // a 16×16 block: 256 threads

__global__ void matmul_tiled_kernel(const float* a /* (m, k) */, const float* b /* (k, n) */,
                                    float* c /* (m, n) */, int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kTile][kTile];  // as[ty][tx] = A[row][k0 + tx]
  __shared__ float bs[kTile][kTile];  // bs[ty][tx] = B[k0 + ty][col]
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + ty;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;

  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    as[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.0f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : 0.0f;
    __syncthreads();  // both tiles are loaded
    for (int j = 0; j < kTile; ++j) acc += as[ty][j] * bs[j][tx];
    __syncthreads();  // nobody overwrites a tile another thread is still reading
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

void matmul_tiled(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                  const Stream& stream) {
  BRIGADE_CHECK(m >= 0 && n >= 0 && k >= 0, "matmul_tiled: negative size (m, n, k) = ("
                                                << m << ", " << n << ", " << k << ")");
  if (m == 0 || n == 0) return;  // C is empty: nothing to launch
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile));
  const dim3 block(kTile, kTile);
  BRIGADE_LAUNCH(matmul_tiled_kernel, grid, block, 0, stream, BRIGADE_EXTENT(a, m * k),
                 BRIGADE_EXTENT(b, k * n), BRIGADE_EXTENT(c, m * n), m, n, k);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

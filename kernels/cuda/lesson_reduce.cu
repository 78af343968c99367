// Sum of an array by shared-memory tree reduction: the first lesson of CUDA.
//
// One pass: block b loads its chunk of 2·kBlock elements into shared memory (adding the
// two halves on the way in), then halves the number of active threads at each step:
//
//   partial: [ 0 1 2 3 4 5 6 7 ]   stride 4: t < 4 adds partial[t + 4]
//            [ 0 1 2 3 ]           stride 2: t < 2 adds partial[t + 2]
//            [ 0 1 ]               stride 1: t < 1 adds partial[t + 1]
//            [ 0 ] -> sums[b]
//
// with a __syncthreads() between steps, so that every thread sees the previous step's
// writes. The launcher runs passes over the block sums until a single block remains,
// whose sum is the answer. Passes are ordered by the stream, not by the host.
#include <algorithm>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kBlock = 256;  // threads per block; a power of two, as the tree halves it
constexpr int64_t kChunk = 2 * kBlock;  // inputs per block

// sums[b] = x[b·kChunk] + ... + x[b·kChunk + kChunk - 1] (inputs past n count as 0).
__global__ void block_sum_kernel(const float* x /* (n) */, int64_t n,
                                 float* sums /* (gridDim.x) */) {
  __shared__ float partial[kBlock];
  const int t = static_cast<int>(threadIdx.x);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kChunk + t;
  float v = 0.0f;
  if (i < n) v = x[i];
  if (i + kBlock < n) v += x[i + kBlock];
  partial[t] = v;
  __syncthreads();  // every load is done before anyone reads a neighbour's slot

  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();  // outside the branch: every thread of the block must reach it
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

namespace {
int64_t blocks_for(int64_t count) { return std::max<int64_t>(1, (count + kChunk - 1) / kChunk); }
}  // namespace

int64_t reduce_sum_shared_workspace(int64_t n) {
  int64_t floats = 0;
  for (int64_t count = n; blocks_for(count) > 1; count = blocks_for(count))
    floats += blocks_for(count);
  return floats;
}

void reduce_sum_shared(const float* x, int64_t n, float* workspace, float* out,
                       const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "reduce_sum_shared: n = " << n << " is negative");
  const float* in = x;  // (count)
  int64_t count = n;
  for (;;) {
    const int64_t blocks = blocks_for(count);
    float* sums = blocks == 1 ? out : workspace;  // (blocks)
    BRIGADE_LAUNCH(block_sum_kernel, static_cast<unsigned>(blocks), kBlock, 0, stream,
                   BRIGADE_EXTENT(in, count), count, BRIGADE_EXTENT(sums, blocks));
    if (blocks == 1) return;
    in = sums;
    count = blocks;
    workspace += blocks;
  }
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

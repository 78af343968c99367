// Sum of an array with warp shuffles: the second lesson of CUDA.
//
// The 32 lanes of a warp can read each other's registers (__shfl_down_sync), so a warp sums
// 32 values in five steps without shared memory or __syncthreads():
//
//   offset 16: lane i adds lane i+16     offset 2: lane i adds lane i+2
//   offset  8: lane i adds lane i+8      offset 1: lane i adds lane i+1   -> lane 0 has it
//   offset  4: lane i adds lane i+4
//
// A block: each thread first sums a grid-stride slice of x; each warp reduces by shuffles;
// lane 0 of every warp leaves its sum in shared memory; after one __syncthreads() the first
// warp reduces those; thread 0 adds the block's sum into *out with atomicAdd, because the
// blocks finish in no particular order. (The result's rounding therefore depends on that
// order: compare with a tolerance.)
#include <algorithm>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kBlock = 256;                // threads per block: 8 whole warps
constexpr int kWarps = kBlock / 32;
constexpr int64_t kMaxBlocks = 64;         // grid-stride loops cover the rest of x
constexpr unsigned kFullMask = 0xffffffffu;  // every lane of the warp takes part

// The sum of v over the warp, in lane 0 (other lanes hold partial sums).
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}

__global__ void set_zero_kernel(float* out /* (1) */) { *out = 0.0f; }

__global__ void warp_sum_kernel(const float* x /* (n) */, int64_t n, float* out /* (1) */) {
  __shared__ float warp_sums[kWarps];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;

  float v = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    v += x[i];

  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // the warp sums are in shared memory

  if (warp == 0) {  // a whole warp takes this branch, so its shuffles are not divergent
    v = warp_sum(lane < kWarps ? warp_sums[lane] : 0.0f);
    if (lane == 0) atomicAdd(out, v);
  }
}

void reduce_sum_warp(const float* x, int64_t n, float* out, const Stream& stream) {
  BRIGADE_CHECK(n >= 0, "reduce_sum_warp: n = " << n << " is negative");
  const int64_t blocks = std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, kMaxBlocks);
  BRIGADE_LAUNCH(set_zero_kernel, 1, 1, 0, stream,
                 BRIGADE_EXTENT(out, 1));  // stream order: before the sums
  BRIGADE_LAUNCH(warp_sum_kernel, static_cast<unsigned>(blocks), kBlock, 0, stream,
                 BRIGADE_EXTENT(x, n), n, BRIGADE_EXTENT(out, 1));
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

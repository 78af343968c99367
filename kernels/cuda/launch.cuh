// The launch shape of the elementwise kernels: 256 threads per block and a grid-stride loop,
//
//   for (i = blockIdx.x·blockDim.x + threadIdx.x; i < n; i += gridDim.x·blockDim.x)
//
// so that thread t of the grid handles elements t, t + T, t + 2T, ... (T threads in all):
// consecutive threads touch consecutive elements (coalesced), and any n fits a grid capped
// at kMaxBlocks blocks. Included by a .cu after kernels/emu/kernel.h.
#pragma once

#include <algorithm>
#include <cstdint>

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kElementwiseBlock = 256;
constexpr int64_t kMaxBlocks = 4096;  // enough to fill any current GPU several times over

// Blocks for n elements: one element per thread up to the cap. n must be > 0.
inline unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(
      std::min<int64_t>((n + kElementwiseBlock - 1) / kElementwiseBlock, kMaxBlocks));
}

// The first element of this thread and the stride of the grid-stride loop.
__device__ __forceinline__ int64_t grid_first() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

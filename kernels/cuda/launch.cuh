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
#include <limits>

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kElementwiseBlock = 256;
constexpr int64_t kMaxBlocks = 4096;  // enough to fill any current GPU several times over

// Blocks for n elements: one element per thread up to the cap. n must be > 0.
inline unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(
      std::min<int64_t>((n + kElementwiseBlock - 1) / kElementwiseBlock, kMaxBlocks));
}

// The first element of this thread and the stride of the grid-stride loop, as Index.
template <class Index = int64_t>
__device__ __forceinline__ Index grid_first() {
  return static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) +
         static_cast<Index>(threadIdx.x);
}
template <class Index = int64_t>
__device__ __forceinline__ Index grid_stride() {
  return static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
}

// 32-bit indices where the sizes allow. On a GPU a 64-bit `/` or `%` is a software routine of
// a few dozen instructions (a 32-bit one is a handful) and 64-bit address arithmetic doubles
// the integer work, so a kernel that divides per element comes as a template on Index, and
// its launcher runs the int32_t instantiation when every index it forms is at most n, the
// int64_t one beyond: never an index that silently wraps. The margin: a grid-stride loop's
// last step may go one grid past n before its test fails.
inline bool fits_int32_indices(int64_t n) {
  return n <= std::numeric_limits<int32_t>::max() - kMaxBlocks * kElementwiseBlock;
}

// Calls launch(Index{}) with Index = int32_t when fits_int32_indices(n), else int64_t; launch
// is a generic lambda that launches kernel<decltype(index)>.
template <class Launch>
void with_index_type(int64_t n, Launch&& launch) {
  if (fits_int32_indices(n)) launch(int32_t{});
  else launch(int64_t{});
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

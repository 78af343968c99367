// Reductions inside one warp and one block, shared by the op kernels (softmax, bias
// gradients, the cross-entropy's batch sum). Included by a .cu after kernels/emu/kernel.h;
// it opens the file's namespace itself, so the emulated and native copies stay apart.
//
// A warp reduces 32 values in five shuffle steps (lane i reads lane i + offset):
//   offset 16, 8, 4, 2, 1  ->  lane 0 holds the result of all 32 lanes.
// __shfl_xor_sync instead gives EVERY lane the result (a butterfly), which softmax needs:
// each lane then normalises its own columns without another broadcast.
#pragma once

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr unsigned kFullWarp = 0xffffffffu;  // every lane of the warp takes part

// The sum of v over the 32 lanes, in every lane.
__device__ __forceinline__ float warp_all_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarp, v, offset);
  return v;
}

// The maximum of v over the 32 lanes, in every lane.
__device__ __forceinline__ float warp_all_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  return v;
}

// The sum of v over the block, returned to thread 0 (others get partial sums). blockDim.x
// must be a multiple of 32 and at most 1024; every thread of the block must call it (it has
// two __syncthreads()). `scratch` is 32 floats of shared memory, free again on return.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = warp_all_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // every warp's sum is in scratch
  if (warp == 0) v = warp_all_sum(lane < warps ? scratch[lane] : 0.0f);
  __syncthreads();  // scratch may be reused by the caller's next call
  return v;
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

// What a CUDA stream keeps for its libraries once it has called them, for the rest of its
// life: cuBLAS's workspace (vendor_handles.h). Plain C++, so that the memory check of a step
// (pipeline/runtime/step_memory.h) weighs it in every build, a CPU-only one included, and a
// run it passes does not then fail at its first GEMM for want of this.
//
// Not counted there: the hand-written path's split-K scratch (gemm_split_k.cuh, 8 MiB, made at
// a stream's first split launch, which the shapes decide), and cuDNN's workspace, taken for
// each call and given back (cudnn_conv.cpp).
#pragma once

#include <cstdint>

namespace brigade::cuda {

// Bytes of cuBLAS workspace a stream's calls share: NVIDIA's recommendation for Hopper
// (32 MiB), which covers every earlier architecture's.
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;

}  // namespace brigade::cuda

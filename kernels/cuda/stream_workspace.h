// What a CUDA stream keeps for its GEMMs once it has run them, for the rest of its life:
// cuBLAS's workspace on the vendor path (vendor_handles.h), the split-K scratch of the
// hand-written path (gemm_split_k.cuh). Plain C++, so that the memory check of a step
// (pipeline/runtime/step_memory.h) weighs them in every build, a CPU-only one included, and a
// run it passes does not then fail at its first GEMM for want of them.
//
// Not counted there: what a call takes and gives back, cuDNN's workspace (cudnn_conv.cpp) and
// the hand-written convolution's im2col buffer (conv2d.cu).
#pragma once

#include <cstdint>

namespace brigade::cuda {

// Bytes of cuBLAS workspace a stream's calls share: NVIDIA's recommendation for Hopper
// (32 MiB), which covers every earlier architecture's.
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;

// Bytes of split-K scratch a stream keeps from its first split launch on, made at the largest
// size any launch needs (gemm_split_k.cuh, which checks these sizes against its own): 128
// partial tiles of 128 x 128 floats, 8 MiB, and 128 tickets.
inline constexpr uint64_t kSplitKScratchBytes = uint64_t{128} * 128 * 128 * 4 + 128 * 4;

}  // namespace brigade::cuda

// What the CUDA paths hold for their GEMMs beside a step's tensors, in plain C++, so that the
// memory check of a step (pipeline/runtime/step_memory.h) weighs it in every build, a CPU-only
// one included, and a run it passes does not then fail at its first GEMM for want of it:
//
//   kept by a stream     once it has run GEMMs, for the rest of its life: cuBLAS's workspace on
//                        the vendor path (vendor_handles.h), the split-K scratch of the
//                        hand-written path (gemm_split_k.cuh)
//   taken by a call      and given back after it: the hand-written convolution's lowered input,
//                        its im2col columns (conv2d.cu), often a step's largest tensor
//
// Not counted there: cuDNN's workspace (cudnn_conv.cpp), which the algorithm cuDNN picks on the
// GPU decides.
#pragma once

#include <algorithm>
#include <cstdint>

namespace brigade::cuda {

// Bytes of cuBLAS workspace a stream's calls share: NVIDIA's recommendation for Hopper
// (32 MiB), which covers every earlier architecture's.
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;

// Bytes of split-K scratch a stream keeps from its first split launch on, made at the largest
// size any launch needs (gemm_split_k.cuh, which checks these sizes against its own): 128
// partial tiles of 128 x 128 floats, 8 MiB, and 128 tickets.
inline constexpr uint64_t kSplitKScratchBytes = uint64_t{128} * 128 * 128 * 4 + 128 * 4;

// Floats of im2col columns a hand-written convolution call of `samples` samples lowers at once
// (conv2d_workspace_floats, conv2d.h), where one sample's columns, (C·R·S, P·Q), are
// `sample_columns` floats: every sample's, up to a budget of 256 MiB, and at least one
// sample's. The call takes them from its stream's allocator and gives them back after.
inline constexpr int64_t kConvLoweringBudgetFloats = int64_t{1} << 26;
inline int64_t conv_lowering_floats(int64_t sample_columns, int64_t samples) {
  return std::clamp<int64_t>(kConvLoweringBudgetFloats / sample_columns, 1,
                             std::max<int64_t>(samples, 1)) *
         sample_columns;
}

}  // namespace brigade::cuda

// Emulated cuDNN's convolution algorithms, as the passes see them (cudnn_algorithms.cpp):
// which algorithms each pass has, whether one runs on tensor cores, and the checks a pass
// makes of its algorithm and workspace before it is enqueued. Internal to kernels/emu/vendor/.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/emu/vendor/cudnn_internal.h"

namespace brigade::emu::vendor {

enum class Scratch { none, output };  // workspace: nothing, or the pass's output's bytes
struct Algorithm {
  int algo;
  bool deterministic;
  Scratch scratch;
  bool supported;
  bool tensor_op;  // TF32 on tensor cores when the descriptor allows CUDNN_TENSOR_OP_MATH
};
// Each pass's algorithms, in the heuristics' order (the ranking: cudnn_algorithms.cpp).
extern const std::vector<Algorithm> kForward;
extern const std::vector<Algorithm> kBackwardData;
extern const std::vector<Algorithm> kBackwardFilter;

// The shape the four descriptors describe into *s, or why they do not describe one
// convolution ("" when they do).
std::string conv_shape(const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                       Conv2dShape* s);

// Whether `algo` of `list` runs on tensor cores under a descriptor of math type `math`.
bool tensor_op(const std::vector<Algorithm>& list, int algo, cudnnMathType_t math);

// The checks of an executing pass before it is enqueued (its descriptors' `why_not`, alpha
// and beta, the algorithm, the workspace against its size query); on success `*scratch` is
// the workspace the algorithm forms its result in (null: none).
cudnnStatus_t check_pass(const char* call, const std::string& why_not, const std::vector<Algorithm>& list,
                         int algo, void* workspace, size_t workspace_bytes, uint64_t output_bytes,
                         const void* alpha, const void* beta, float** scratch);

}  // namespace brigade::emu::vendor

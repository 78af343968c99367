// What cuDNN is told about a convolution: the descriptors of one shape in one math mode, which
// every pass of cudnn_conv.cpp and the algorithm choice (cudnn_conv_algorithms.h) read.
//
// cuDNN describes each operand with a descriptor (its layout and sizes); a convolution
// descriptor holds padding, stride and the arithmetic:
//
//   tensors       NCHW float x, y, bias (1, K, 1, 1); KCRS filter w
//   convolution   cross-correlation (what frameworks call convolution), in the math of the
//                 math mode (kernels/math_mode.h): CUDNN_FMA_MATH in fp32 (no TF32),
//                 CUDNN_TENSOR_OP_MATH in tf32
//   activation    ReLU, NaN propagated
//
// made once per (shape, mode) and kept (descriptors_for, vendor_handles.h). The heuristics
// list (algorithm, math) pairs, and a pass computes in the math of the convolution descriptor
// it is given, not the pair's: in tf32 a pair runs on a descriptor of its own math
// (conv_for), so that the math the log names is the math that runs.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>

#include "kernels/cuda/vendor.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor::cudnn_conv {

// A convolution shape and the math mode its descriptors and algorithms are for.
struct ConvProblem : Conv2dShape {
  MathMode math;
};

// Every size of the shape, and the mode: what the descriptors are made from, and so the key
// of the caches of descriptors and of algorithms.
using ShapeKey = std::array<int64_t, 13>;
ShapeKey shape_key(const ConvProblem& s);

// The descriptors of one convolution shape, destroyed with the object.
class ConvDescriptors {
 public:
  explicit ConvDescriptors(const ConvProblem& s);
  ~ConvDescriptors();  // destroying a descriptor cannot usefully fail; errors are ignored

  // cuDNN pads pad_h rows on BOTH sides; our shape may have one more at the bottom
  // (TensorFlow's "same"). Then cuDNN's output size differs: refuse, naming the reason.
  // (A method, not part of the constructor, so that the destructor runs when it throws.)
  void check_output(const Conv2dShape& s) const;

  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  // The convolution a pair of the heuristics' lists runs on: in fp32 `conv`, FMA only,
  // whatever the pair says (TF32 is never allowed there); in tf32 the descriptor of the pair's
  // own math. (Each descriptor is set once, by the constructor, and only read after: every
  // thread shares them.)
  cudnnConvolutionDescriptor_t conv_for(cudnnMathType_t pair_math) const {
    if (math == MathMode::fp32 || pair_math == CUDNN_TENSOR_OP_MATH) return conv;
    return pair_math == CUDNN_DEFAULT_MATH ? conv_default : conv_fma;
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // `conv` in the mode's math, which the heuristics are asked with; the same convolution in
  // FMA and in cuDNN's default math, for the pairs of those maths in tf32.
  cudnnConvolutionDescriptor_t conv = nullptr, conv_fma = nullptr, conv_default = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  MathMode math = MathMode::fp32;
};

// The descriptors of s, checked, from the per-process cache.
const ConvDescriptors& descriptors(const ConvProblem& s);

}  // namespace brigade::cuda::vendor::cudnn_conv

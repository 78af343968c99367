// Conv2D through cuDNN: forward, backward-data, backward-filter, backward-bias.
//
// cuDNN describes each operand with a descriptor (its layout and sizes:
// cudnn_conv_descriptors.h); an algorithm is chosen per pass (cudnn_conv_algorithms.h), and
// may need scratch memory (the workspace) which the caller provides. A pass here takes the
// descriptors of its shape, a handle of its stream's device and the shape's algorithms, checks
// the caller's workspace, and runs with the algorithm chosen for it:
//
//   forward       with a bias and a ReLU, one call (cudnnConvolutionBiasActivationForward)
//                 over the forward candidates; where cuDNN refuses it for every one, the
//                 convolution, cudnnAddTensor and cudnnActivationForward: three calls.
//   backward      data (dx overwritten), filter (dw accumulated), bias (db accumulated).
//
// This uses cuDNN's legacy API (cudnn_cnn.h), which cuDNN 9 keeps but marks deprecated in
// favour of the graph API; it is the readable one.
#include <cudnn.h>

#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/cudnn_conv_algorithms.h"
#include "kernels/cuda/cudnn_conv_descriptors.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {

using namespace cudnn_conv;  // the descriptors and the algorithm choice, this file's helpers

namespace {

// The algorithms for s, after checking the caller's workspace is large enough.
ConvAlgorithms& prepare(const char* op, const ConvProblem& s, const ConvDescriptors& d,
                        const CudnnLease& dnn, const Stream& stream, const void* workspace,
                        size_t workspace_bytes) {
  ConvAlgorithms& a = algorithms_for(s, d, dnn.handle(), stream.device().index);
  BRIGADE_CHECK(workspace_bytes >= a.workspace_bytes && (a.workspace_bytes == 0 || workspace),
                op << " (cuDNN): workspace of " << workspace_bytes << " bytes at " << workspace
                   << ", this shape needs " << a.workspace_bytes
                   << " (conv2d_workspace_bytes)");
  return a;
}

// What a pass with an algorithm needs, in this order: the descriptors of the shape in the math
// mode, a cuDNN handle of the stream's device bound to the stream (held for the pass), and the
// algorithms.
struct ConvPass {
  ConvPass(const char* op, const Conv2dShape& shape, MathMode math, const Stream& stream,
           const void* workspace, size_t workspace_bytes)
      : s{shape, math},
        d(descriptors(s)),
        dnn(stream),
        a(prepare(op, s, d, dnn, stream, workspace, workspace_bytes)),
        device(stream.device().index) {}

  const ConvProblem s;
  const ConvDescriptors& d;
  const CudnnLease dnn;
  ConvAlgorithms& a;
  const int device;
};

constexpr float kOne = 1.0f, kZero = 0.0f;  // cuDNN's alpha/beta scalars, in host memory

}  // namespace

size_t conv2d_workspace_bytes(const Conv2dShape& shape, const Stream& stream, MathMode math) {
  const ConvProblem s{shape, math};
  const ConvDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  return algorithms_for(s, d, dnn.handle(), stream.device().index).workspace_bytes;
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, void* workspace, size_t workspace_bytes,
                    const Stream& stream, bool relu, MathMode math) {
  const ConvPass pass("conv2d_forward", s, math, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  const cudnnHandle_t dnn = pass.dnn.handle();
  // With a bias and a ReLU: one call, y = relu(1 · (x ⋆ w) + 0 · z + bias), z = y unread (its
  // factor is 0). ReLU runs with any forward algorithm (only the identity activation is tied
  // to IMPLICIT_PRECOMP_GEMM), but cuDNN may still refuse the fused call for a shape: then
  // the three calls below, for good, said once.
  if (b && relu && !fused_declined(pass.a)) {
    if (run_pass("conv2d_forward", "fused forward", pass.a.fused, workspace_bytes, s, pass.device,
                 [&](const Candidate<cudnnConvolutionFwdAlgo_t>& pick) {
                   return cudnnConvolutionBiasActivationForward(
                       dnn, &kOne, d.x, x, d.w, w, d.conv_for(pick.math), pick.algo, workspace,
                       workspace_bytes, &kZero, d.y, y, d.bias, b, d.relu, d.y, y);
                 },
                 /*may_decline=*/true))
      return;
    decline_fused(pass.a, s, pass.device);
  }
  run_pass("conv2d_forward", "forward", pass.a.forward, workspace_bytes, s, pass.device,
           [&](const Candidate<cudnnConvolutionFwdAlgo_t>& pick) {
             return cudnnConvolutionForward(dnn, &kOne, d.x, x, d.w, w, d.conv_for(pick.math),
                                            pick.algo, workspace, workspace_bytes, &kZero, d.y,
                                            y);
           });
  if (b) BRIGADE_CUDNN_CHECK(cudnnAddTensor(dnn, &kOne, d.bias, b, &kOne, d.y, y));
  if (relu) BRIGADE_CUDNN_CHECK(cudnnActivationForward(dnn, d.relu, &kOne, d.y, y, &kZero, d.y, y));
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          void* workspace, size_t workspace_bytes, const Stream& stream,
                          MathMode math) {
  const ConvPass pass("conv2d_backward_data", s, math, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 0: dx is overwritten.
  run_pass("conv2d_backward_data", "backward-data", pass.a.backward_data, workspace_bytes, s,
           pass.device, [&](const Candidate<cudnnConvolutionBwdDataAlgo_t>& pick) {
             return cudnnConvolutionBackwardData(pass.dnn.handle(), &kOne, d.w, w, d.y, dy,
                                                 d.conv_for(pick.math), pick.algo, workspace,
                                                 workspace_bytes, &kZero, d.x, dx);
           });
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            void* workspace, size_t workspace_bytes, const Stream& stream,
                            MathMode math) {
  const ConvPass pass("conv2d_backward_filter", s, math, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 1: dw += the batch's gradient (micro-batches accumulate in place).
  run_pass("conv2d_backward_filter", "backward-filter", pass.a.backward_filter, workspace_bytes,
           s, pass.device, [&](const Candidate<cudnnConvolutionBwdFilterAlgo_t>& pick) {
             return cudnnConvolutionBackwardFilter(pass.dnn.handle(), &kOne, d.x, x, d.y, dy,
                                                   d.conv_for(pick.math), pick.algo, workspace,
                                                   workspace_bytes, &kOne, d.w, dw);
           });
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream) {
  const ConvDescriptors& d = descriptors({s, math_mode()});  // a sum: no math mode in it
  const CudnnLease dnn(stream);
  BRIGADE_CUDNN_CHECK(
      cudnnConvolutionBackwardBias(dnn.handle(), &kOne, d.y, dy, &kOne, d.bias, db));
}

}  // namespace brigade::cuda::vendor

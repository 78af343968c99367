// Conv2D through cuDNN: forward, backward-data, backward-filter, backward-bias.
//
// cuDNN describes each operand with a descriptor (its layout and sizes); a convolution
// descriptor holds padding, stride and the arithmetic; an algorithm is chosen per pass, and
// may need scratch memory (the workspace) which the caller provides.
//
//   descriptors   NCHW float tensors x, y, bias (1, K, 1, 1); KCRS filter w;
//                 cross-correlation (what frameworks call convolution), FP32 math (no TF32)
//                 — made once per shape and kept (descriptors_for, vendor_handles.h)
//   algorithms    cuDNN's heuristics (cudnnGet*Algorithm_v7: no trial runs, so choosing is
//                 cheap and allocates nothing); the best-ranked one that is deterministic —
//                 a training run is then reproducible. Chosen once per (device, shape),
//                 cached with its workspace size.
//
// This uses cuDNN's legacy API (cudnn_cnn.h), which cuDNN 9 keeps but marks deprecated in
// favour of the graph API; it is the readable one.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"

namespace brigade::cuda::vendor {
namespace {

// Every size of a convolution shape: what its descriptors are made from, and so the key of
// the caches below.
using ShapeKey = std::array<int64_t, 12>;
ShapeKey shape_key(const Conv2dShape& s) {
  return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad_h, s.pad_w, s.P, s.Q};
}

// cuDNN takes int sizes; the constructor below has checked that they fit.
int as_int(int64_t v) { return static_cast<int>(v); }

// A float NCHW tensor descriptor of n × c × h × w.
void set_nchw(cudnnTensorDescriptor_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
  BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(n),
                                                 as_int(c), as_int(h), as_int(w)));
}

// The descriptors of one convolution shape, destroyed with the object.
class ConvDescriptors {
 public:
  explicit ConvDescriptors(const Conv2dShape& s) {
    for (int64_t v : shape_key(s))  // before anything is created: a throw here leaks nothing
      BRIGADE_CHECK(v >= 0 && v <= INT_MAX, "conv2d (cuDNN): a size of the shape exceeds int: " << v);
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
    BRIGADE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    BRIGADE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    set_nchw(x, s.N, s.C, s.H, s.W);  // (N, C, H, W)
    set_nchw(y, s.N, s.K, s.P, s.Q);  // (N, K, P, Q)
    set_nchw(bias, 1, s.K, 1, 1);     // (1, K, 1, 1)
    BRIGADE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,  // KCRS
                                                   as_int(s.K), as_int(s.C), as_int(s.R),
                                                   as_int(s.S)));
    BRIGADE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, as_int(s.pad_h), as_int(s.pad_w), as_int(s.stride), as_int(s.stride), 1, 1,
        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
    BRIGADE_CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu));
    // NaN stays NaN through the ReLU, as in the hand-written kernels and on the CPU.
    BRIGADE_CUDNN_CHECK(
        cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }

  ~ConvDescriptors() {  // destroying a descriptor cannot usefully fail; errors are ignored
    cudnnDestroyActivationDescriptor(relu);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }

  // cuDNN pads pad_h rows on BOTH sides; our shape may have one more at the bottom
  // (TensorFlow's "same"). Then cuDNN's output size differs: refuse, naming the reason.
  // (A method, not part of the constructor, so that the destructor runs when it throws.)
  void check_output(const Conv2dShape& s) const {
    int n = 0, k = 0, p = 0, q = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &p, &q));
    BRIGADE_CHECK(p == s.P && q == s.Q,
                  "conv2d (cuDNN): input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W
                      << ") with " << s.R << "x" << s.S << " filters, stride " << s.stride
                      << " needs asymmetric 'same' padding (output " << s.P << "x" << s.Q
                      << ", cuDNN's symmetric padding gives " << p << "x" << q
                      << "); cuDNN cannot express it: use the hand-written path "
                         "(set_cuda_path(CudaPath::handwritten) or BRIGADE_CUDA_PATH=handwritten)");
  }

  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
};

// The descriptors of s, checked, from the per-process cache.
const ConvDescriptors& descriptors(const Conv2dShape& s) {
  return descriptors_for<ConvDescriptors>(s, shape_key(s));
}

struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward;
  cudnnConvolutionBwdDataAlgo_t backward_data;
  cudnnConvolutionBwdFilterAlgo_t backward_filter;
  size_t workspace_bytes;  // the largest of the three
};

// The first (best-ranked) usable deterministic algorithm of a heuristic list.
template <class Perf>
decltype(Perf::algo) pick(const Perf* perfs, int count, const char* pass, const Conv2dShape& s) {
  for (int i = 0; i < count; ++i)
    if (perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].determinism == CUDNN_DETERMINISTIC)
      return perfs[i].algo;
  BRIGADE_CHECK(false, "conv2d (cuDNN): no deterministic " << pass << " algorithm for input ("
                                                           << s.N << ", " << s.C << ", " << s.H
                                                           << ", " << s.W << "), " << s.K
                                                           << " filters " << s.R << "x" << s.S);
  return perfs[0].algo;  // not reached
}

const ConvAlgorithms& algorithms_for(const Conv2dShape& s, const ConvDescriptors& d,
                                     cudnnHandle_t handle, int device) {
  using Key = std::pair<int, ShapeKey>;  // (device, shape)
  static std::mutex mutex;
  static auto* cache = new std::map<Key, ConvAlgorithms>();  // never freed, like the handles
  const Key key{device, shape_key(s)};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  ConvAlgorithms a{};
  int count = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> fwd{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y,
                                                             static_cast<int>(fwd.size()), &count,
                                                             fwd.data()));
  a.forward = pick(fwd.data(), count, "forward", s);
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> bwd_data{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, d.w, d.y, d.conv, d.x, static_cast<int>(bwd_data.size()), &count, bwd_data.data()));
  a.backward_data = pick(bwd_data.data(), count, "backward-data", s);
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> bwd_filter{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle, d.x, d.y, d.conv, d.w, static_cast<int>(bwd_filter.size()), &count,
      bwd_filter.data()));
  a.backward_filter = pick(bwd_filter.data(), count, "backward-filter", s);

  size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y,
                                                              a.forward, &fwd_bytes));
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      handle, d.w, d.y, d.conv, d.x, a.backward_data, &data_bytes));
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      handle, d.x, d.y, d.conv, d.w, a.backward_filter, &filter_bytes));
  a.workspace_bytes = std::max({fwd_bytes, data_bytes, filter_bytes});
  return cache->emplace(key, a).first->second;
}

// The algorithms for s, after checking the caller's workspace is large enough.
const ConvAlgorithms& prepare(const char* op, const Conv2dShape& s, const ConvDescriptors& d,
                              const CudnnLease& dnn, const Stream& stream, const void* workspace,
                              size_t workspace_bytes) {
  const ConvAlgorithms& a = algorithms_for(s, d, dnn.handle(), stream.device().index);
  BRIGADE_CHECK(workspace_bytes >= a.workspace_bytes && (a.workspace_bytes == 0 || workspace),
                op << " (cuDNN): workspace of " << workspace_bytes << " bytes at " << workspace
                   << ", this shape needs " << a.workspace_bytes
                   << " (conv2d_workspace_bytes)");
  return a;
}

// What a pass with an algorithm needs, in this order: the shape's descriptors, the device's
// cuDNN handle bound to the stream (held for the pass), and the chosen algorithms.
struct ConvPass {
  ConvPass(const char* op, const Conv2dShape& s, const Stream& stream, const void* workspace,
           size_t workspace_bytes)
      : d(descriptors(s)),
        dnn(stream),
        a(prepare(op, s, d, dnn, stream, workspace, workspace_bytes)) {}

  const ConvDescriptors& d;
  const CudnnLease dnn;
  const ConvAlgorithms& a;
};

constexpr float kOne = 1.0f, kZero = 0.0f;  // cuDNN's alpha/beta scalars, in host memory

}  // namespace

size_t conv2d_workspace_bytes(const Conv2dShape& s, const Stream& stream) {
  const ConvDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  return algorithms_for(s, d, dnn.handle(), stream.device().index).workspace_bytes;
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, void* workspace, size_t workspace_bytes,
                    const Stream& stream, bool relu) {
  const ConvPass pass("conv2d_forward", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  const cudnnHandle_t dnn = pass.dnn.handle();
  BRIGADE_CUDNN_CHECK(cudnnConvolutionForward(dnn, &kOne, d.x, x, d.w, w, d.conv, pass.a.forward,
                                              workspace, workspace_bytes, &kZero, d.y, y));
  if (b) BRIGADE_CUDNN_CHECK(cudnnAddTensor(dnn, &kOne, d.bias, b, &kOne, d.y, y));
  if (relu) BRIGADE_CUDNN_CHECK(cudnnActivationForward(dnn, d.relu, &kOne, d.y, y, &kZero, d.y, y));
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          void* workspace, size_t workspace_bytes, const Stream& stream) {
  const ConvPass pass("conv2d_backward_data", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 0: dx is overwritten.
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardData(pass.dnn.handle(), &kOne, d.w, w, d.y, dy, d.conv,
                                                   pass.a.backward_data, workspace, workspace_bytes,
                                                   &kZero, d.x, dx));
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            void* workspace, size_t workspace_bytes, const Stream& stream) {
  const ConvPass pass("conv2d_backward_filter", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 1: dw += the batch's gradient (micro-batches accumulate in place).
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(pass.dnn.handle(), &kOne, d.x, x, d.y, dy,
                                                     d.conv, pass.a.backward_filter, workspace,
                                                     workspace_bytes, &kOne, d.w, dw));
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream) {
  const ConvDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardBias(dnn.handle(), &kOne, d.y, dy, &kOne, d.bias, db));
}

}  // namespace brigade::cuda::vendor

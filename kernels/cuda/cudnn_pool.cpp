// Max pooling through cuDNN, forward and backward.
//
// cuDNN's pooling keeps no argmax: backward is given x, y and dy and finds, in each window,
// the cell of x equal to y again. CUDNN_POOLING_MAX_DETERMINISTIC makes that reproducible;
// with ties, which cell gets the gradient is cuDNN's choice, not necessarily the first one
// (the hand-written kernel's documented rule), so the two paths may route a tied window's
// gradient to different cells. Padding cells never win (cuDNN treats them as -inf).
//
// NaN: CUDNN_PROPAGATE_NAN, for the reference's rule (kernels/reference/maxpool2d.h, as in
// PyTorch): a window holding a NaN outputs NaN, so the stage's finite check sees it, and
// backward sends that window's gradient to its first NaN in row-major order (an all-NaN
// window: its first cell, which TensorFlow's cuDNN tests also record). With
// CUDNN_NOT_PROPAGATE_NAN cuDNN passes over NaNs: a window's NaN would vanish into its largest
// number, and an all-NaN window's gradient would be dropped. tests/kernels/cuda/vendor_test.cpp
// checks windows with one, two and only NaNs, forward and backward, against the reference.
#include <cudnn.h>

#include <array>
#include <climits>

#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"

namespace brigade::cuda::vendor {
namespace {

class PoolDescriptors {
 public:
  explicit PoolDescriptors(const Pool2dShape& s) {
    const std::array<int64_t, 11> sizes{s.N, s.C, s.H, s.W, s.R, s.S, s.stride, s.pad_h, s.pad_w, s.P, s.Q};
    for (int64_t v : sizes)  // before anything is created: a throw here leaks nothing
      BRIGADE_CHECK(v >= 0 && v <= INT_MAX, "maxpool2d (cuDNN): a size of the shape exceeds int: " << v);
    auto i = [](int64_t v) { return static_cast<int>(v); };
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    BRIGADE_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool));
    BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(s.N),
                                                   i(s.C), i(s.H), i(s.W)));
    BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(s.N),
                                                   i(s.C), i(s.P), i(s.Q)));
    BRIGADE_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool, CUDNN_POOLING_MAX_DETERMINISTIC,
                                                    CUDNN_PROPAGATE_NAN, i(s.R), i(s.S),
                                                    i(s.pad_h), i(s.pad_w), i(s.stride),
                                                    i(s.stride)));
  }
  ~PoolDescriptors() {
    BRIGADE_CUDNN_REPORT(cudnnDestroyPoolingDescriptor(pool));
    BRIGADE_CUDNN_REPORT(cudnnDestroyTensorDescriptor(y));
    BRIGADE_CUDNN_REPORT(cudnnDestroyTensorDescriptor(x));
  }
  PoolDescriptors(const PoolDescriptors&) = delete;
  PoolDescriptors& operator=(const PoolDescriptors&) = delete;

  // cuDNN pads symmetrically; TensorFlow's "same" may pad one more row at the bottom. Then
  // cuDNN's output size differs from ours: refuse, naming the reason.
  void check_output(const Pool2dShape& s) const {
    int n = 0, c = 0, p = 0, q = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pool, x, &n, &c, &p, &q));
    BRIGADE_CHECK(p == s.P && q == s.Q,
                  "maxpool2d (cuDNN): input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W
                      << "), pool " << s.R << "x" << s.S << ", stride " << s.stride
                      << " needs asymmetric 'same' padding (output " << s.P << "x" << s.Q
                      << ", cuDNN's symmetric padding gives " << p << "x" << q
                      << "); cuDNN cannot express it: use the hand-written path "
                         "(set_cuda_path(CudaPath::handwritten) or BRIGADE_CUDA_PATH=handwritten)");
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};

// The descriptors of s, checked, from the per-process cache (vendor_handles.h).
const PoolDescriptors& descriptors(const Pool2dShape& s) {
  return descriptors_for<PoolDescriptors>(
      s, std::array<int64_t, 11>{s.N, s.C, s.H, s.W, s.R, s.S, s.stride, s.pad_h, s.pad_w, s.P,
                                 s.Q});
}

constexpr float kOne = 1.0f, kZero = 0.0f;  // cuDNN's alpha/beta scalars, in host memory

}  // namespace

void maxpool2d_forward(const float* x, float* y, const Pool2dShape& s, const Stream& stream) {
  const PoolDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  BRIGADE_CUDNN_CHECK(cudnnPoolingForward(dnn.handle(), d.pool, &kOne, d.x, x, &kZero, d.y, y));
}

void maxpool2d_backward(const float* x, const float* y, const float* dy, float* dx,
                        const Pool2dShape& s, const Stream& stream) {
  const PoolDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  // dy has y's shape and dx has x's: the same two descriptors serve both.
  BRIGADE_CUDNN_CHECK(cudnnPoolingBackward(dnn.handle(), d.pool, &kOne, d.y, y, d.y, dy, d.x, x,
                                           &kZero, d.x, dx));
}

}  // namespace brigade::cuda::vendor

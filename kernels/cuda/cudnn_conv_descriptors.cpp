// The cuDNN descriptors of a convolution shape (cudnn_conv_descriptors.h says what they are).
#include "kernels/cuda/cudnn_conv_descriptors.h"

#include <climits>

#include "engine/error.h"
#include "kernels/cuda/vendor_handles.h"

namespace brigade::cuda::vendor::cudnn_conv {
namespace {

// cuDNN takes int sizes; the constructor below has checked that they fit.
int as_int(int64_t v) { return static_cast<int>(v); }

// A float NCHW tensor descriptor of n × c × h × w.
void set_nchw(cudnnTensorDescriptor_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
  BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(n),
                                                 as_int(c), as_int(h), as_int(w)));
}

}  // namespace

ShapeKey shape_key(const ConvProblem& s) {
  return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad_h, s.pad_w, s.P, s.Q,
          static_cast<int64_t>(s.math)};
}

ConvDescriptors::ConvDescriptors(const ConvProblem& s) {
  for (int64_t v : shape_key(s))  // before anything is created: a throw here leaks nothing
    BRIGADE_CHECK(v >= 0 && v <= INT_MAX,
                  "conv2d (cuDNN): a size of the shape exceeds int: " << v);
  BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
  BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
  BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
  BRIGADE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
  for (cudnnConvolutionDescriptor_t* c : {&conv, &conv_fma, &conv_default})
    BRIGADE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(c));
  set_nchw(x, s.N, s.C, s.H, s.W);  // (N, C, H, W)
  set_nchw(y, s.N, s.K, s.P, s.Q);  // (N, K, P, Q)
  set_nchw(bias, 1, s.K, 1, 1);     // (1, K, 1, 1)
  BRIGADE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,  // KCRS
                                                 as_int(s.K), as_int(s.C), as_int(s.R),
                                                 as_int(s.S)));
  for (cudnnConvolutionDescriptor_t c : {conv, conv_fma, conv_default})
    BRIGADE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        c, as_int(s.pad_h), as_int(s.pad_w), as_int(s.stride), as_int(s.stride), 1, 1,
        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(
      conv, s.math == MathMode::tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_fma, CUDNN_FMA_MATH));
  BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_default, CUDNN_DEFAULT_MATH));
  math = s.math;
  BRIGADE_CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu));
  // NaN stays NaN through the ReLU, as in the hand-written kernels and on the CPU.
  BRIGADE_CUDNN_CHECK(
      cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
}

ConvDescriptors::~ConvDescriptors() {
  BRIGADE_CUDNN_REPORT(cudnnDestroyActivationDescriptor(relu));
  BRIGADE_CUDNN_REPORT(cudnnDestroyConvolutionDescriptor(conv_default));
  BRIGADE_CUDNN_REPORT(cudnnDestroyConvolutionDescriptor(conv_fma));
  BRIGADE_CUDNN_REPORT(cudnnDestroyConvolutionDescriptor(conv));
  BRIGADE_CUDNN_REPORT(cudnnDestroyFilterDescriptor(w));
  BRIGADE_CUDNN_REPORT(cudnnDestroyTensorDescriptor(bias));
  BRIGADE_CUDNN_REPORT(cudnnDestroyTensorDescriptor(y));
  BRIGADE_CUDNN_REPORT(cudnnDestroyTensorDescriptor(x));
}

void ConvDescriptors::check_output(const Conv2dShape& s) const {
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

const ConvDescriptors& descriptors(const ConvProblem& s) {
  return descriptors_for<ConvDescriptors>(s, shape_key(s));
}

}  // namespace brigade::cuda::vendor::cudnn_conv

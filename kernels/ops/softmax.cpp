// Softmax of kernels/ops.h, forward and backward: the checks, then the CPU branch
// (kernels/cpu/softmax.h) beside the CUDA branch (kernels/cuda/softmax.cu, a warp per row).
// The fused softmax + cross-entropy the loss uses is in loss.cpp.
#include "kernels/cpu/softmax.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

Tensor softmax_forward(const Tensor& x, const Stream& stream) {
  detail::check_operands("softmax_forward", stream, {{"x", &x}});
  detail::check_rows("softmax_forward", x, nullptr);
  const int64_t N = x.shape()[0], classes = x.shape()[1];
  Tensor y = Tensor::empty(x.shape(), stream);  // (N, classes)
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, y}, [=](ThreadPool&) {
      cpu::softmax_forward(x.data<float>(), y.data<float>(), N, classes);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &y});
    cuda::softmax_forward(x.data<float>(), y.data<float>(), N, classes, stream);
#else
    detail::no_kernel("softmax_forward", stream.device());
#endif
  }
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy, const Stream& stream) {
  detail::check_operands("softmax_backward", stream, {{"y", &y}, {"dy", &dy}});
  detail::check_rows("softmax_backward", y, nullptr);
  detail::check_same_shape("softmax_backward", "y", y, "dy", dy);
  const int64_t N = y.shape()[0], classes = y.shape()[1];
  Tensor dx = Tensor::empty(y.shape(), stream);  // (N, classes)
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {y, dy, dx}, [=](ThreadPool&) {
      cpu::softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), N, classes);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&y, &dy, &dx});
    cuda::softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), N, classes,
                           stream);
#else
    detail::no_kernel("softmax_backward", stream.device());
#endif
  }
  return dx;
}

}  // namespace brigade::ops

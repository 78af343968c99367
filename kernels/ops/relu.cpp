// ReLU of kernels/ops.h: the checks, then the CPU branch (kernels/cpu/relu.h) beside the
// CUDA branch (kernels/cuda/relu.cu). The backward reads the forward's OUTPUT.
//
// Both select: each element of the result is the corresponding x (dy) or +0.0f, on every
// device; so bf16 values in give bf16 values out, and the result says so when x (dy) does
// (Tensor::holds_bf16_values: precision bf16 then rounds it no more).
#include "kernels/cpu/relu.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

Tensor relu_forward(const Tensor& x, const Stream& stream) {
  detail::check_operands("relu_forward", stream, {{"x", &x}});
  Tensor y = Tensor::empty(x.shape(), stream);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::relu_forward(x.data<float>(), y.data<float>(), x.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &y});
    cuda::relu_forward(x.data<float>(), y.data<float>(), x.numel(), stream);
#else
    detail::no_kernel("relu_forward", stream.device());
#endif
  }
  return x.holds_bf16_values() ? y.marked_bf16_values() : y;
}

Tensor relu_backward(const Tensor& y, const Tensor& dy, const Stream& stream,
                     Bf16Rounding round) {
  detail::check_operands("relu_backward", stream, {{"y", &y}, {"dy", &dy}});
  detail::check_same_shape("relu_backward", "y", y, "dy", dy);
  Tensor dx = Tensor::empty(y.shape(), stream);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {y, dy, dx}, [=](ThreadPool& pool) {
      cpu::relu_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), y.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&y, &dy, &dx});
    const bool rounds = round == Bf16Rounding::fused;
    cuda::relu_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), y.numel(), stream,
                        rounds);
    if (rounds) return dx.marked_bf16_values();
#else
    (void)round;
    detail::no_kernel("relu_backward", stream.device());
#endif
  }
  return dy.holds_bf16_values() ? dx.marked_bf16_values() : dx;
}

}  // namespace brigade::ops

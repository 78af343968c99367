// MaxPooling2D of kernels/ops.h: the checks, then the CPU branch (kernels/cpu/maxpool2d.h,
// with an argmax) beside the CUDA branch (the hand-written kernel with an argmax, or cuDNN,
// which has none and keeps x for its backward: ops.h, PoolResult).
//
// The CPU and hand-written forwards select: each output is a copy of one input element (the
// argmax's), so bf16 values in are bf16 values out, and the output says so when x does
// (Tensor::holds_bf16_values: precision bf16 then rounds it no more). cuDNN's is not marked:
// its output is a maximum too, but NVIDIA does not say which bits a NaN comes out with.
#include <stdexcept>
#include <string>

#include "kernels/cpu/maxpool2d.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"
#endif

namespace brigade::ops {

namespace {
Pool2dShape pool_shape(const char* op, const Shape& x, const Pool2dArgs& a) {
  BRIGADE_CHECK(x.rank() == 4, op << ": input " << x << " is not (N, C, H, W)");
  try {
    return make_pool2d_shape(x[0], x[1], x[2], x[3], a.pool_h, a.pool_w, a.stride,
                             Padding::valid);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}
}  // namespace

PoolResult maxpool2d_forward(const Tensor& x, const Pool2dArgs& a, const Stream& stream) {
  detail::check_operands("maxpool2d_forward", stream, {{"x", &x}});
  const Pool2dShape s = pool_shape("maxpool2d_forward", x.shape(), a);
  const Shape out({s.N, s.C, s.P, s.Q});
  PoolResult r{Tensor::empty(out, stream), Tensor(), Tensor(), x.shape()};
  if (stream.device().is_cpu()) {
    r.argmax = Tensor::empty(out, stream);  // int32 bits
    detail::on_cpu(stream, {x, r.y, r.argmax}, [=, y = r.y, argmax = r.argmax](ThreadPool& pool) {
      cpu::maxpool2d_forward(x.data<float>(), y.data<float>(), detail::int32_data(argmax), s, pool);
    });
    if (x.holds_bf16_values()) r.y = r.y.marked_bf16_values();
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &r.y});
    if (cuda_path() == CudaPath::vendor) {
      r.x = x;  // cuDNN's backward reads x and y instead of an argmax
      cuda::vendor::maxpool2d_forward(x.data<float>(), r.y.data<float>(), s, stream);
    } else {
      r.argmax = Tensor::empty(out, stream);  // int32 bits
      cuda::maxpool2d_forward(x.data<float>(), r.y.data<float>(), detail::int32_data(r.argmax), s,
                              stream);
      if (x.holds_bf16_values()) r.y = r.y.marked_bf16_values();
    }
#else
    detail::no_kernel("maxpool2d_forward", stream.device());
#endif
  }
  return r;
}

Tensor maxpool2d_backward(const Tensor& dy, const PoolResult& fwd, const Pool2dArgs& a,
                          const Stream& stream, const Tensor& relu_y, Bf16Rounding round) {
  detail::check_operands("maxpool2d_backward", stream, {{"dy", &dy}});
  const Pool2dShape s = pool_shape("maxpool2d_backward", fwd.x_shape, a);
  const Shape out({s.N, s.C, s.P, s.Q});
  BRIGADE_CHECK(dy.shape() == out, "maxpool2d_backward: dy " << dy.shape()
                                                              << " is not the output shape "
                                                              << out << " of input "
                                                              << fwd.x_shape);
  if (relu_y.defined()) {
    detail::check_operands("maxpool2d_backward", stream, {{"relu_y", &relu_y}});
    BRIGADE_CHECK(relu_y.shape() == out, "maxpool2d_backward: relu_y "
                                             << relu_y.shape() << " is not the output shape "
                                             << out);
  }
  Tensor dx = Tensor::empty(fwd.x_shape, stream);  // (N, C, H, W)
  if (stream.device().is_cpu()) {
    detail::check_operands("maxpool2d_backward", stream, {{"argmax", &fwd.argmax}});
    const Tensor argmax = fwd.argmax;  // (N, C, P, Q), int32 bits
    detail::on_cpu(stream, {dy, argmax, dx, relu_y}, [=](ThreadPool& pool) {
      cpu::maxpool2d_backward(dy.data<float>(), detail::int32_data(argmax), dx.data<float>(), s,
                              pool, relu_y.defined() ? relu_y.data<float>() : nullptr);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    // Masking the (N, C, P, Q) gradient first gives the same bits (layers/tape.cpp).
    const Tensor g = relu_y.defined() ? relu_backward(relu_y, dy, stream) : dy;
    detail::on_cuda(stream, {&g, &fwd.x, &fwd.y, &fwd.argmax, &dx});
    if (fwd.argmax.defined()) {  // the forward ran the hand-written kernel
      const bool rounds = round == Bf16Rounding::fused;
      cuda::maxpool2d_backward(g.data<float>(), detail::int32_data(fwd.argmax), dx.data<float>(), s,
                               stream, rounds);
      return detail::rounded_if(rounds, dx);
    } else {
      BRIGADE_CHECK(fwd.x.defined() && fwd.y.defined(),
                    "maxpool2d_backward: the forward kept neither an argmax nor x and y");
      cuda::vendor::maxpool2d_backward(fwd.x.data<float>(), fwd.y.data<float>(), g.data<float>(),
                                       dx.data<float>(), s, stream);
    }
#else
    (void)round;
    detail::no_kernel("maxpool2d_backward", stream.device());
#endif
  }
  return dx;
}

}  // namespace brigade::ops

// The layer ops of kernels/ops.h: Conv2D, MaxPooling2D, ReLU, Dropout, Dense. Each checks,
// allocates its outputs on the stream, then dispatches on the device (ops_dispatch.h).
#include "kernels/ops.h"

#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/maxpool2d.h"
#include "kernels/cpu/relu.h"
#include "kernels/ops_dispatch.h"

namespace brigade::ops {

using detail::check_operands;
using detail::int32_data;
using detail::on_cpu;

// ---- Conv2D --------------------------------------------------------------------------------

Conv2dShape conv2d_shape(const char* op, const Shape& x, const Shape& w, const Conv2dArgs& a) {
  BRIGADE_CHECK(x.rank() == 4 && w.rank() == 4 && x[1] == w[1],
                op << ": input " << x << " (N, C, H, W) does not match weights " << w
                   << " (K, C, R, S)");
  try {
    return make_conv2d_shape(x[0], x[1], x[2], x[3], w[0], w[2], w[3], a.stride, a.padding);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

namespace {
void check_bias(const char* op, const Tensor& b, int64_t units) {
  BRIGADE_CHECK(b.shape() == Shape({units}),
                op << ": bias " << b.shape() << " does not match " << units << " outputs");
}

// The conv workspace (cpu/conv2d.h) as a tensor of the stream, so that it is cached by the
// allocator between calls and freed only after the task that uses it has run.
Tensor conv_workspace(const Conv2dShape& s, const Stream& stream) {
  const int64_t floats = cpu::conv2d_workspace_floats(s, stream.thread_pool());
  return Tensor::empty(Shape({floats > 0 ? floats : 1}), stream);
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& a,
                      bool relu, const Stream& stream) {
  check_operands("conv2d_forward", stream, {{"x", &x}, {"w", &w}, {"b", &b}});
  const Conv2dShape s = conv2d_shape("conv2d_forward", x.shape(), w.shape(), a);
  check_bias("conv2d_forward", b, s.K);
  Tensor y = Tensor::empty(Shape({s.N, s.K, s.P, s.Q}), stream);  // (N, K, P, Q)
  if (stream.device().is_cpu()) {
    Tensor ws = conv_workspace(s, stream);
    on_cpu(stream, {x, w, b, y, ws}, [=](ThreadPool& pool) {
      cpu::conv2d_forward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), s,
                          pool, ws.data<float>(), relu);
    });
  } else {
    BRIGADE_OPS_CUDA(conv2d_forward, (x, w, b, y, s, relu, stream));
  }
  return y;
}

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                            const Conv2dArgs& a, const Stream& stream, const Tensor& relu_x) {
  check_operands("conv2d_backward_data", stream, {{"dy", &dy}, {"w", &w}});
  const Conv2dShape s = conv2d_shape("conv2d_backward_data", x_shape, w.shape(), a);
  BRIGADE_CHECK(dy.shape() == Shape({s.N, s.K, s.P, s.Q}),
                "conv2d_backward_data: dy " << dy.shape() << " is not the output shape "
                                            << Shape({s.N, s.K, s.P, s.Q}) << " of input "
                                            << x_shape << " and weights " << w.shape());
  if (relu_x.defined()) {
    check_operands("conv2d_backward_data", stream, {{"relu_x", &relu_x}});
    BRIGADE_CHECK(relu_x.shape() == x_shape, "conv2d_backward_data: relu_x "
                                                 << relu_x.shape() << " is not the input shape "
                                                 << x_shape);
  }
  Tensor dx = Tensor::empty(x_shape, stream);  // (N, C, H, W)
  if (stream.device().is_cpu()) {
    Tensor ws = conv_workspace(s, stream);
    on_cpu(stream, {dy, w, dx, ws, relu_x}, [=](ThreadPool& pool) {
      cpu::conv2d_backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), s, pool,
                                ws.data<float>(),
                                relu_x.defined() ? relu_x.data<float>() : nullptr);
    });
  } else {
    BRIGADE_OPS_CUDA(conv2d_backward_data, (dy, w, dx, s, stream));
    if (relu_x.defined()) return relu_backward(relu_x, dx, stream);  // a second kernel
  }
  return dx;
}

void conv2d_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw,
                            const Tensor& db, const Conv2dArgs& a, const Stream& stream) {
  check_operands("conv2d_backward_params", stream, {{"x", &x}, {"dy", &dy}, {"dw", &dw},
                                                    {"db", &db}});
  const Conv2dShape s = conv2d_shape("conv2d_backward_params", x.shape(), dw.shape(), a);
  check_bias("conv2d_backward_params", db, s.K);
  BRIGADE_CHECK(dy.shape() == Shape({s.N, s.K, s.P, s.Q}),
                "conv2d_backward_params: dy " << dy.shape() << " is not the output shape "
                                              << Shape({s.N, s.K, s.P, s.Q}) << " of input "
                                              << x.shape() << " and weights " << dw.shape());
  if (stream.device().is_cpu()) {
    Tensor ws = conv_workspace(s, stream);
    on_cpu(stream, {x, dy, dw, db, ws}, [=](ThreadPool& pool) {
      cpu::conv2d_backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(), s, pool,
                                  ws.data<float>());
      cpu::conv2d_backward_bias(dy.data<float>(), db.data<float>(), s, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(conv2d_backward_params, (x, dy, dw, db, s, stream));
  }
}

// ---- MaxPooling2D ----------------------------------------------------------------------------

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
  check_operands("maxpool2d_forward", stream, {{"x", &x}});
  const Pool2dShape s = pool_shape("maxpool2d_forward", x.shape(), a);
  const Shape out({s.N, s.C, s.P, s.Q});
  PoolResult r{Tensor::empty(out, stream), Tensor(), Tensor(), x.shape()};
  if (stream.device().is_cpu()) {
    r.argmax = Tensor::empty(out, stream);  // int32 bits
    on_cpu(stream, {x, r.y, r.argmax}, [=, y = r.y, argmax = r.argmax](ThreadPool& pool) {
      cpu::maxpool2d_forward(x.data<float>(), y.data<float>(), int32_data(argmax), s, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(maxpool2d_forward, (x, r, s, stream));
  }
  return r;
}

Tensor maxpool2d_backward(const Tensor& dy, const PoolResult& fwd, const Pool2dArgs& a,
                          const Stream& stream, const Tensor& relu_y) {
  check_operands("maxpool2d_backward", stream, {{"dy", &dy}});
  const Pool2dShape s = pool_shape("maxpool2d_backward", fwd.x_shape, a);
  const Shape out({s.N, s.C, s.P, s.Q});
  BRIGADE_CHECK(dy.shape() == out, "maxpool2d_backward: dy " << dy.shape()
                                                              << " is not the output shape "
                                                              << out << " of input "
                                                              << fwd.x_shape);
  if (relu_y.defined()) {
    check_operands("maxpool2d_backward", stream, {{"relu_y", &relu_y}});
    BRIGADE_CHECK(relu_y.shape() == out, "maxpool2d_backward: relu_y "
                                             << relu_y.shape() << " is not the output shape "
                                             << out);
  }
  Tensor dx = Tensor::empty(fwd.x_shape, stream);  // (N, C, H, W)
  if (stream.device().is_cpu()) {
    check_operands("maxpool2d_backward", stream, {{"argmax", &fwd.argmax}});
    on_cpu(stream, {dy, fwd.argmax, dx, relu_y}, [=, argmax = fwd.argmax](ThreadPool& pool) {
      cpu::maxpool2d_backward(dy.data<float>(), int32_data(argmax), dx.data<float>(), s, pool,
                              relu_y.defined() ? relu_y.data<float>() : nullptr);
    });
  } else {
    // Masking the (N, C, P, Q) gradient first gives the same bits (layers/tape.cpp).
    const Tensor g = relu_y.defined() ? relu_backward(relu_y, dy, stream) : dy;
    BRIGADE_OPS_CUDA(maxpool2d_backward, (g, fwd, dx, s, stream));
  }
  return dx;
}

// ---- ReLU, Dropout -------------------------------------------------------------------------

Tensor relu_forward(const Tensor& x, const Stream& stream) {
  check_operands("relu_forward", stream, {{"x", &x}});
  Tensor y = Tensor::empty(x.shape(), stream);
  if (stream.device().is_cpu()) {
    on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::relu_forward(x.data<float>(), y.data<float>(), x.numel(), pool);
    });
  } else {
    BRIGADE_OPS_CUDA(relu_forward, (x, y, stream));
  }
  return y;
}

Tensor relu_backward(const Tensor& y, const Tensor& dy, const Stream& stream) {
  check_operands("relu_backward", stream, {{"y", &y}, {"dy", &dy}});
  detail::check_same_shape("relu_backward", "y", y, "dy", dy);
  Tensor dx = Tensor::empty(y.shape(), stream);
  if (stream.device().is_cpu()) {
    on_cpu(stream, {y, dy, dx}, [=](ThreadPool& pool) {
      cpu::relu_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), y.numel(), pool);
    });
  } else {
    BRIGADE_OPS_CUDA(relu_backward, (y, dy, dx, stream));
  }
  return dx;
}

namespace {
// Forward and backward apply the same mask and scale: one function serves both.
Tensor dropout_apply(const char* op, const Tensor& x, float rate, const DropoutKey& key,
                     int64_t sample_offset, const Stream& stream) {
  check_operands(op, stream, {{"x", &x}});
  BRIGADE_CHECK(x.shape().rank() >= 1 && x.shape()[0] >= 1 && sample_offset >= 0,
                op << ": input " << x.shape() << " needs a batch dimension; sample offset "
                   << sample_offset);
  const int64_t batch = x.shape()[0];
  const int64_t per_sample = x.numel() / batch;
  try {
    check_dropout_args(rate, sample_offset + batch, per_sample);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
  Tensor y = Tensor::empty(x.shape(), stream);
  if (stream.device().is_cpu()) {
    on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::dropout_forward(x.data<float>(), y.data<float>(), batch, per_sample, sample_offset,
                           rate, key, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(dropout, (x, y, rate, key, sample_offset, stream));
  }
  return y;
}
}  // namespace

Tensor dropout_forward(const Tensor& x, float rate, const DropoutKey& key,
                       int64_t sample_offset, const Stream& stream) {
  return dropout_apply("dropout_forward", x, rate, key, sample_offset, stream);
}

Tensor dropout_backward(const Tensor& dy, float rate, const DropoutKey& key,
                        int64_t sample_offset, const Stream& stream) {
  return dropout_apply("dropout_backward", dy, rate, key, sample_offset, stream);
}

// ---- Dense ---------------------------------------------------------------------------------

namespace {
void check_dense(const char* op, const Shape& x, const Shape& w) {
  BRIGADE_CHECK(x.rank() == 2 && w.rank() == 2 && x[1] == w[1],
                op << ": x " << x << " (N, in) does not match w " << w << " (out, in)");
}
}  // namespace

Tensor dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, bool relu,
                     const Stream& stream) {
  check_operands("dense_forward", stream, {{"x", &x}, {"w", &w}, {"b", &b}});
  check_dense("dense_forward", x.shape(), w.shape());
  check_bias("dense_forward", b, w.shape()[0]);
  const int64_t N = x.shape()[0], in = w.shape()[1], out = w.shape()[0];
  Tensor y = Tensor::empty(Shape({N, out}), stream);  // (N, out)
  if (stream.device().is_cpu()) {
    on_cpu(stream, {x, w, b, y}, [=](ThreadPool& pool) {
      cpu::dense_forward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), N,
                         in, out, pool, relu);
    });
  } else {
    BRIGADE_OPS_CUDA(dense_forward, (x, w, b, y, relu, stream));
  }
  return y;
}

Tensor dense_backward_data(const Tensor& dy, const Tensor& w, const Stream& stream) {
  check_operands("dense_backward_data", stream, {{"dy", &dy}, {"w", &w}});
  BRIGADE_CHECK(dy.shape().rank() == 2 && w.shape().rank() == 2 && dy.shape()[1] == w.shape()[0],
                "dense_backward_data: dy " << dy.shape() << " (N, out) does not match w "
                                           << w.shape() << " (out, in)");
  const int64_t N = dy.shape()[0], in = w.shape()[1], out = w.shape()[0];
  Tensor dx = Tensor::empty(Shape({N, in}), stream);  // (N, in)
  if (stream.device().is_cpu()) {
    on_cpu(stream, {dy, w, dx}, [=](ThreadPool& pool) {
      cpu::dense_backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), N, in, out,
                               pool);
    });
  } else {
    BRIGADE_OPS_CUDA(dense_backward_data, (dy, w, dx, stream));
  }
  return dx;
}

void dense_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                           const Stream& stream) {
  check_operands("dense_backward_params", stream, {{"x", &x}, {"dy", &dy}, {"dw", &dw},
                                                   {"db", &db}});
  check_dense("dense_backward_params", x.shape(), dw.shape());
  check_bias("dense_backward_params", db, dw.shape()[0]);
  const int64_t N = x.shape()[0], in = dw.shape()[1], out = dw.shape()[0];
  BRIGADE_CHECK(dy.shape() == Shape({N, out}), "dense_backward_params: dy "
                                                   << dy.shape() << " is not (" << N << ", "
                                                   << out << ") for x " << x.shape());
  if (stream.device().is_cpu()) {
    on_cpu(stream, {x, dy, dw, db}, [=](ThreadPool& pool) {
      cpu::dense_backward_weight(x.data<float>(), dy.data<float>(), dw.data<float>(), N, in, out,
                                 pool);
      cpu::dense_backward_bias(dy.data<float>(), db.data<float>(), N, out, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(dense_backward_params, (x, dy, dw, db, stream));
  }
}

}  // namespace brigade::ops

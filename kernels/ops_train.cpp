// The training ops of kernels/ops.h: softmax, the fused loss, accuracy, optimizer updates and
// the elementwise helpers autodiff needs. Same pattern as ops.cpp (ops_dispatch.h).
#include <cstring>
#include <memory>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/optimizers.h"
#include "kernels/cpu/softmax.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

namespace brigade::ops {

using detail::check_operands;
using detail::check_same_shape;
using detail::int32_data;
using detail::on_cpu;

namespace {
// (N, classes) logits, and (N) labels when given.
void check_rows(const char* op, const Tensor& x, const Tensor* labels) {
  BRIGADE_CHECK(x.shape().rank() == 2 && x.shape()[1] >= 1,
                op << ": expects (N, classes), got " << x.shape());
  if (labels)
    BRIGADE_CHECK(labels->shape() == Shape({x.shape()[0]}),
                  op << ": labels " << labels->shape() << " do not match logits " << x.shape());
}
}  // namespace

Tensor softmax_forward(const Tensor& x, const Stream& stream) {
  check_operands("softmax_forward", stream, {{"x", &x}});
  check_rows("softmax_forward", x, nullptr);
  Tensor y = Tensor::empty(x.shape(), stream);
  if (stream.device().is_cpu()) {
    on_cpu(stream, {x, y}, [=](ThreadPool&) {
      cpu::softmax_forward(x.data<float>(), y.data<float>(), x.shape()[0], x.shape()[1]);
    });
  } else {
    BRIGADE_OPS_CUDA(softmax_forward, (x, y, stream));
  }
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy, const Stream& stream) {
  check_operands("softmax_backward", stream, {{"y", &y}, {"dy", &dy}});
  check_rows("softmax_backward", y, nullptr);
  check_same_shape("softmax_backward", "y", y, "dy", dy);
  Tensor dx = Tensor::empty(y.shape(), stream);
  if (stream.device().is_cpu()) {
    on_cpu(stream, {y, dy, dx}, [=](ThreadPool&) {
      cpu::softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), y.shape()[0],
                            y.shape()[1]);
    });
  } else {
    BRIGADE_OPS_CUDA(softmax_backward, (y, dy, dx, stream));
  }
  return dx;
}

Tensor labels_tensor(const std::vector<int32_t>& labels, const Stream& stream) {
  // The int32 bits travel inside a float vector, copied bytewise, never converted.
  std::vector<float> bits(labels.size());
  static_assert(sizeof(float) == sizeof(int32_t));
  if (!labels.empty()) std::memcpy(bits.data(), labels.data(), labels.size() * sizeof(int32_t));
  return Tensor::from_vector(bits, Shape({static_cast<int64_t>(labels.size())}), stream);
}

LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float normaliser,
                                 const Stream& stream) {
  check_operands("softmax_cross_entropy", stream, {{"logits", &logits}, {"labels", &labels}});
  check_rows("softmax_cross_entropy", logits, &labels);
  BRIGADE_CHECK(normaliser > 0, "softmax_cross_entropy: normaliser must be positive, got "
                                    << normaliser);
  LossResult r{Tensor::empty(Shape({1}), stream), Tensor::empty(logits.shape(), stream), Tensor()};
  if (stream.device().is_cpu()) {
    on_cpu(stream, {logits, labels, r.loss, r.dlogits},
           [=, loss = r.loss, d = r.dlogits](ThreadPool&) {
             *loss.data<float>() =
                 cpu::softmax_cross_entropy(logits.data<float>(), int32_data(labels),
                                            d.data<float>(), logits.shape()[0],
                                            logits.shape()[1], normaliser);
           });
  } else {
    BRIGADE_OPS_CUDA(softmax_cross_entropy, (logits, labels, normaliser, r, stream));
  }
  return r;
}

float loss_value(const LossResult& r) {
  BRIGADE_CHECK(r.loss.defined(), "loss_value: the loss is an undefined tensor");
#if defined(BRIGADE_HAVE_CUDA)
  if (r.status.defined()) cuda_ops::check_loss_status(r, r.dlogits.shape()[1]);
#endif
  return r.loss.to_vector()[0];  // on a CPU stream, rethrows a failed task (a bad label)
}

int64_t accuracy_count(const Tensor& logits, const Tensor& labels, const Stream& stream) {
  check_operands("accuracy_count", stream, {{"logits", &logits}, {"labels", &labels}});
  check_rows("accuracy_count", logits, &labels);
  if (stream.device().is_cpu()) {
    auto count = std::make_shared<int64_t>(0);
    on_cpu(stream, {logits, labels}, [=](ThreadPool&) {
      *count = cpu::accuracy_count(logits.data<float>(), int32_data(labels), logits.shape()[0],
                                   logits.shape()[1]);
    });
    stream.synchronize();  // the stream's worker wrote *count before it counted as done
    return *count;
  }
#if defined(BRIGADE_HAVE_CUDA)
  return cuda_ops::accuracy_count(logits, labels, stream);
#else
  detail::no_kernel("accuracy_count", stream.device());
#endif
}

// ---- Optimizer updates -----------------------------------------------------------------------

void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream) {
  check_operands("sgd_step", stream, {{"p", &p}, {"g", &g}, {"buf", &buf}});
  check_same_shape("sgd_step", "p", p, "g", g);
  check_same_shape("sgd_step", "p", p, "buf", buf);
  try {
    check_sgd_params(h);  // here, on the host, rather than as a failed task later
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    on_cpu(stream, {p, g, buf}, [=](ThreadPool& pool) {
      cpu::sgd_update(p.data<float>(), g.data<float>(), buf.data<float>(), p.numel(), h,
                      first_step, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(sgd_step, (p, g, buf, h, first_step, stream));
  }
}

void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream) {
  check_operands("adam_step", stream, {{"p", &p}, {"g", &g}, {"m", &m}, {"v", &v}});
  check_same_shape("adam_step", "p", p, "g", g);
  check_same_shape("adam_step", "p", p, "m", m);
  check_same_shape("adam_step", "p", p, "v", v);
  try {
    check_adam_params(h, step);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    on_cpu(stream, {p, g, m, v}, [=](ThreadPool& pool) {
      cpu::adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                       p.numel(), h, step, pool);
    });
  } else {
    BRIGADE_OPS_CUDA(adam_step, (p, g, m, v, h, step, stream));
  }
}

// ---- Elementwise -----------------------------------------------------------------------------

void accumulate(const Tensor& dst, const Tensor& src, const Stream& stream) {
  check_operands("accumulate", stream, {{"dst", &dst}, {"src", &src}});
  BRIGADE_CHECK(dst.numel() == src.numel(), "accumulate: dst " << dst.shape() << " and src "
                                                               << src.shape()
                                                               << " differ in size");
  if (stream.device().is_cpu()) {
    on_cpu(stream, {dst, src}, [=](ThreadPool& pool) {
      cpu::add_to(src.data<float>(), dst.data<float>(), dst.numel(), pool);
    });
  } else {
    BRIGADE_OPS_CUDA(accumulate, (dst, src, stream));
  }
}

void scale(const Tensor& t, float a, const Stream& stream) {
  check_operands("scale", stream, {{"t", &t}});
  if (stream.device().is_cpu()) {
    on_cpu(stream, {t}, [=](ThreadPool& pool) { cpu::scale(t.data<float>(), a, t.numel(), pool); });
  } else {
    BRIGADE_OPS_CUDA(scale, (t, a, stream));
  }
}

void fill(const Tensor& t, float a, const Stream& stream) {
  check_operands("fill", stream, {{"t", &t}});
  if (stream.device().is_cpu()) {
    on_cpu(stream, {t}, [=](ThreadPool& pool) { cpu::fill(t.data<float>(), a, t.numel(), pool); });
  } else {
    BRIGADE_OPS_CUDA(fill, (t, a, stream));
  }
}

}  // namespace brigade::ops

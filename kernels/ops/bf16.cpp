// The bf16 value ops of kernels/ops.h: rounding a float32 tensor to bf16 values, and narrowing
// to / widening from bfloat16 storage. The CPU branch (kernels/cpu/bf16_values.h) beside the
// CUDA branch (kernels/cuda/bf16_values.cu, the same on both CUDA paths): the same bits.
#include "kernels/cpu/bf16_values.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

using detail::bf16_data;

Tensor detail::bf16_operand(const Tensor& t, bool bf16, const Stream& stream) {
  if (!bf16 || t.holds_bf16_values()) return t;  // rounding would write the same bits
  if (t.dtype() == DType::bfloat16) return widen_to_float32(t, stream);  // exact, marked
  return round_to_bf16(t, Tensor::empty(t.shape(), stream), stream);
}

Tensor detail::bf16_storage(const Tensor& t, const Stream& stream) {
  return t.dtype() == DType::bfloat16 ? t : narrow_to_bf16(t, stream);
}

void detail::check_gemm_operand(const char* op, const char* name, const Tensor& t,
                                const Stream& stream) {
  if (t.defined() && t.dtype() == DType::bfloat16) {
    BRIGADE_CHECK(precision() == Precision::bf16 && stream.device().is_cuda(),
                  op << ": " << name << " " << t.str() << " in bfloat16 storage is for "
                     << "precision bf16 on a GPU; here the precision is "
                     << precision_name(precision()) << " on " << stream.device());
    BRIGADE_CHECK(t.device() == stream.device(), op << ": " << name << " " << t.str()
                                                    << " is not on the stream's device "
                                                    << stream.str());
    return;
  }
  check_operands(op, stream, {{name, &t}});
}

void detail::check_dy_gemm(const char* op, const Tensor& dy_gemm, const Tensor& dy,
                           const Stream& stream) {
  if (!dy_gemm.defined()) return;
  check_gemm_operand(op, "dy_gemm", dy_gemm, stream);
  BRIGADE_CHECK(dy_gemm.shape() == dy.shape(), op << ": dy_gemm " << dy_gemm.shape()
                                                  << " is not dy's shape " << dy.shape());
}

Tensor round_to_bf16(const Tensor& x, const Tensor& out, const Stream& stream) {
  detail::check_operands("round_to_bf16", stream, {{"x", &x}, {"out", &out}});
  detail::check_same_shape("round_to_bf16", "x", x, "out", out);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, out}, [=](ThreadPool& pool) {
      cpu::round_to_bf16_values(x.data<float>(), out.data<float>(), x.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &out});
    cuda::round_to_bf16_values(x.data<float>(), out.data<float>(), x.numel(), stream);
#else
    detail::no_kernel("round_to_bf16", stream.device());
#endif
  }
  return out.marked_bf16_values();
}

Tensor narrow_to_bf16(const Tensor& x, const Stream& stream) {
  detail::check_operands("narrow_to_bf16", stream, {{"x", &x}});
  Tensor y = Tensor::empty(x.shape(), stream, DType::bfloat16);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::narrow_to_bf16(x.data<float>(), bf16_data(y), x.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &y});
    cuda::narrow_to_bf16(x.data<float>(), bf16_data(y), x.numel(), stream);
#else
    detail::no_kernel("narrow_to_bf16", stream.device());
#endif
  }
  return y;
}

Tensor widen_to_float32(const Tensor& x, const Stream& stream) {
  BRIGADE_CHECK(x.defined() && x.dtype() == DType::bfloat16,
                "widen_to_float32: x " << (x.defined() ? x.str() : "undefined")
                                       << " is not a bfloat16 tensor");
  BRIGADE_CHECK(x.device() == stream.device(), "widen_to_float32: x " << x.str()
                                                   << " is not on the stream's device "
                                                   << stream.str());
  Tensor y = Tensor::empty(x.shape(), stream);
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::widen_from_bf16(bf16_data(x), y.data<float>(), x.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &y});
    cuda::widen_from_bf16(bf16_data(x), y.data<float>(), x.numel(), stream);
#else
    detail::no_kernel("widen_to_float32", stream.device());
#endif
  }
  return y.marked_bf16_values();
}

}  // namespace brigade::ops

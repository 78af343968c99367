// The elementwise helpers of kernels/ops.h that autodiff and the optimizers need —
// accumulate (dst += src), scale (t *= a), fill (t = a): the checks, then the CPU branch
// (kernels/cpu/elementwise.h) beside the CUDA branch (kernels/cuda/elementwise.cu).
#include "kernels/cpu/elementwise.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

void accumulate(const Tensor& dst, const Tensor& src, const Stream& stream) {
  detail::check_operands("accumulate", stream, {{"dst", &dst}, {"src", &src}});
  BRIGADE_CHECK(dst.numel() == src.numel(), "accumulate: dst " << dst.shape() << " and src "
                                                               << src.shape()
                                                               << " differ in size");
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {dst, src}, [=](ThreadPool& pool) {
      cpu::add_to(src.data<float>(), dst.data<float>(), dst.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&dst, &src});
    cuda::add_to(src.data<float>(), dst.data<float>(), dst.numel(), stream);
#else
    detail::no_kernel("accumulate", stream.device());
#endif
  }
}

void scale(const Tensor& t, float a, const Stream& stream) {
  detail::check_operands("scale", stream, {{"t", &t}});
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {t}, [=](ThreadPool& pool) {
      cpu::scale(t.data<float>(), a, t.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&t});
    cuda::scale(t.data<float>(), a, t.numel(), stream);
#else
    detail::no_kernel("scale", stream.device());
#endif
  }
}

void fill(const Tensor& t, float a, const Stream& stream) {
  detail::check_operands("fill", stream, {{"t", &t}});
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {t}, [=](ThreadPool& pool) {
      cpu::fill(t.data<float>(), a, t.numel(), pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&t});
    cuda::fill(t.data<float>(), a, t.numel(), stream);
#else
    detail::no_kernel("fill", stream.device());
#endif
  }
}

}  // namespace brigade::ops

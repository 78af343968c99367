// The optimizer updates of kernels/ops.h, SGD and Adam/AdamW, in place with PyTorch's rules:
// the checks (hyper-parameters too, here on the host rather than as a failed task later),
// then the CPU branch (kernels/cpu/optimizers.h) beside the CUDA branch
// (kernels/cuda/optimizers.cu).
#include <stdexcept>

#include "kernels/cpu/optimizers.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream) {
  detail::check_operands("sgd_step", stream, {{"p", &p}, {"g", &g}, {"buf", &buf}});
  detail::check_same_shape("sgd_step", "p", p, "g", g);
  detail::check_same_shape("sgd_step", "p", p, "buf", buf);
  try {
    check_sgd_params(h);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {p, g, buf}, [=](ThreadPool& pool) {
      cpu::sgd_update(p.data<float>(), g.data<float>(), buf.data<float>(), p.numel(), h,
                      first_step, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&p, &g, &buf});
    cuda::sgd_update(p.data<float>(), g.data<float>(), buf.data<float>(), p.numel(), h,
                     first_step, stream);
#else
    detail::no_kernel("sgd_step", stream.device());
#endif
  }
}

void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream) {
  detail::check_operands("adam_step", stream, {{"p", &p}, {"g", &g}, {"m", &m}, {"v", &v}});
  detail::check_same_shape("adam_step", "p", p, "g", g);
  detail::check_same_shape("adam_step", "p", p, "m", m);
  detail::check_same_shape("adam_step", "p", p, "v", v);
  try {
    check_adam_params(h, step);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {p, g, m, v}, [=](ThreadPool& pool) {
      cpu::adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                       p.numel(), h, step, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&p, &g, &m, &v});
    cuda::adam_update(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                      p.numel(), h, step, stream);
#else
    detail::no_kernel("adam_step", stream.device());
#endif
  }
}

}  // namespace brigade::ops

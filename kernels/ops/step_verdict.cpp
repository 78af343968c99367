// A step's verdict on a GPU (kernels/ops.h, kernels/step_verdict.h): the checks, then the
// CUDA launch (kernels/cuda/step_verdict.cu). No CPU branch: on a CPU stream a check is a task
// that throws, and the stream's sticky error is the verdict (pipeline/runtime/step_checks.h).
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"
#include "kernels/step_verdict.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

void detail::check_verdict(const char* op, const Tensor& verdict, int64_t word,
                           const Stream& stream) {
  BRIGADE_CHECK(stream.device().is_cuda(),
                op << ": a step's verdict on the device is for CUDA streams, not " << stream.str());
  detail::check_operands(op, stream, {{"verdict", &verdict}});
  BRIGADE_CHECK(verdict.shape().rank() == 1 && word >= 0 && word < verdict.numel(),
                op << ": word " << word << " of a verdict " << verdict.shape().str());
}

void step_verdict_check_finite(const Tensor& t, const Tensor& verdict, int64_t word,
                               int32_t failed, const Stream& stream) {
  detail::check_verdict("step_verdict_check_finite", verdict, word, stream);
  detail::check_operands("step_verdict_check_finite", stream, {{"t", &t}});
#if defined(BRIGADE_HAVE_CUDA)
  detail::on_cuda(stream, {&t, &verdict});
  cuda::step_verdict_check_finite(t.data<float>(), t.numel(), detail::int32_data(verdict) + word,
                                  failed, stream);
#else
  (void)failed;
#endif
}

}  // namespace brigade::ops

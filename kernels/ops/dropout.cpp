// Dropout of kernels/ops.h: the checks, then the CPU branch (kernels/cpu/dropout.h) beside
// the CUDA branch (kernels/cuda/dropout.cu). Both draw the Philox mask of dropout_mask.h, so
// the same (key, sample, element) keeps the same element on every device.
#include <stdexcept>
#include <string>

#include "kernels/cpu/dropout.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#endif

namespace brigade::ops {

namespace {
// Forward and backward apply the same mask and scale: one function serves both.
Tensor dropout_apply(const char* op, const Tensor& x, float rate, const DropoutKey& key,
                     int64_t sample_offset, const Stream& stream, const Tensor& step_word,
                     Bf16Rounding round) {
  detail::check_operands(op, stream, {{"x", &x}});
  BRIGADE_CHECK(!step_word.defined() ||
                    (stream.device().is_cuda() && step_word.device() == stream.device() &&
                     step_word.numel() == 1 && step_word.dtype() == DType::float32),
                op << ": the step's word is one float32's 4 bytes on the stream's GPU, not "
                   << step_word.shape() << " on " << step_word.device().str() << " for "
                   << stream.str());
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
  Tensor y = Tensor::empty(x.shape(), stream);  // like x: (batch, per_sample)
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, y}, [=](ThreadPool& pool) {
      cpu::dropout_forward(x.data<float>(), y.data<float>(), batch, per_sample, sample_offset,
                           rate, key, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &y});
    if (step_word.defined()) detail::record_use(step_word, stream);
    cuda::dropout_forward(x.data<float>(), y.data<float>(), batch, per_sample, sample_offset,
                          rate, key,
                          step_word.defined() ? static_cast<const uint32_t*>(step_word.storage()->data())
                                              : nullptr,
                          stream, round == Bf16Rounding::fused);
    return detail::rounded_if(round == Bf16Rounding::fused, y);
#else
    (void)round;
    detail::no_kernel(op, stream.device());
#endif
  }
  return y;
}
}  // namespace

Tensor dropout_forward(const Tensor& x, float rate, const DropoutKey& key,
                       int64_t sample_offset, const Stream& stream, const Tensor& step_word,
                       Bf16Rounding round) {
  return dropout_apply("dropout_forward", x, rate, key, sample_offset, stream, step_word, round);
}

Tensor dropout_backward(const Tensor& dy, float rate, const DropoutKey& key,
                        int64_t sample_offset, const Stream& stream, const Tensor& step_word,
                        Bf16Rounding round) {
  return dropout_apply("dropout_backward", dy, rate, key, sample_offset, stream, step_word,
                       round);
}

}  // namespace brigade::ops

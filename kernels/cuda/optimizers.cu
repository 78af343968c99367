// SGD (momentum, dampening, Nesterov, weight decay) and Adam/AdamW, one parameter per thread
// of a grid-stride loop. The formulas are kernels/reference/optimizers.h's, line for line:
//
//   SGD:   g' = g + wd·p;  buf = first ? g' : μ·buf + (1 - dampening)·g'
//          d = nesterov ? g' + μ·buf : buf  (d = g' without momentum);  p -= lr·d
//   Adam:  g' = g + wd·p (AdamW instead: p *= 1 - lr·wd, g' = g)
//          m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²
//          p -= step_size · m / (sqrt(v) / bc2_sqrt + eps)
//
// The bias corrections step_size = lr / (1 - β1^t) and bc2_sqrt = sqrt(1 - β2^t) are the
// same for every element: the launcher computes them once on the host, in double as PyTorch
// does, exactly as the reference.
#include <cmath>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optimizers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void sgd_kernel(float* p /* (n) */, const float* g /* (n) */, float* buf /* (n) */,
                           int64_t n, SgdParams h, bool first_step) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float d = g[i] + h.weight_decay * p[i];
    if (h.momentum != 0.0f) {
      buf[i] = first_step ? d : h.momentum * buf[i] + (1.0f - h.dampening) * d;
      d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
    }
    p[i] -= h.lr * d;
  }
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v /* (n) each */,
                            int64_t n, AdamParams h, float step_size, float bc2_sqrt) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float gi = g[i];
    if (h.decoupled) p[i] *= 1.0f - h.lr * h.weight_decay;
    else gi += h.weight_decay * p[i];
    m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * gi;
    v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * gi * gi;
    p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + h.eps);
  }
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, const Stream& stream) {
  check_sgd_params(h);
  BRIGADE_CHECK(n >= 0, "sgd_update: n = " << n << " is negative");
  BRIGADE_CHECK(h.momentum == 0.0f || buf != nullptr, "sgd_update: momentum " << h.momentum
                                                          << " needs a momentum buffer, got null");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  BRIGADE_LAUNCH(sgd_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream, p, g, buf, n, h,
                 first_step);
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamParams& h,
                 int64_t step, const Stream& stream) {
  check_adam_params(h, step);
  BRIGADE_CHECK(n >= 0, "adam_update: n = " << n << " is negative");
  if (n == 0) return;
  const double t = static_cast<double>(step);
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(double(h.beta1), t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double(h.beta2), t)));
  BRIGADE_LAUNCH(adam_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream, p, g, m, v, n,
                 h, step_size, bc2_sqrt);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

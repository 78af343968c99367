// SGD (momentum, dampening, Nesterov, weight decay) and Adam/AdamW, one parameter per thread
// of a grid-stride loop. The formulas and the order of operations are
// kernels/reference/optimizers.h's (PyTorch's), line for line:
//
//   SGD:   g' = g + wd·p;  buf = first ? g' : μ·buf + keep·g'   (keep = 1 - dampening)
//          d = nesterov ? g' + μ·buf : buf  (d = g' without momentum);  p -= lr·d
//   Adam:  g' = g + wd·p (AdamW instead: p *= decay = 1 - lr·wd, g' = g)
//          m += (1-β1)·(g' - m)   (lerp);   v = β2·v + (1-β2)·g'²
//          p -= step_size · m / (sqrt(v) / bc2_sqrt + eps)
//
// The hyper-parameters arrive in double (as a user writes them). Every scalar that is the
// same for all elements — 1 - dampening, step_size = lr / (1 - β1^t), bc2_sqrt =
// sqrt(1 - β2^t), 1 - lr·wd, ... — is derived once on the host, in double, and rounded to
// float, exactly as the reference does; the kernels see only floats.
#include <cmath>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void sgd_kernel(float* p /* (n) */, const float* g /* (n) */, float* buf /* (n) */,
                           int64_t n, float lr, float mu, float keep, float wd, bool momentum,
                           bool nesterov, bool first_step) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float d = g[i] + wd * p[i];
    if (momentum) {
      buf[i] = first_step ? d : mu * buf[i] + keep * d;
      d = nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

// The per-step scalars of Adam, derived on the host (see the top of the file).
struct AdamScalars {
  float step_size, bc2_sqrt, decay, wd, w1, b2, w2, eps;
  bool decoupled;
};

__global__ void adam_kernel(float* p, const float* g, float* m, float* v /* (n) each */,
                            int64_t n, AdamScalars a) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float gi = g[i];
    if (a.decoupled) p[i] *= a.decay;
    else gi += a.wd * p[i];
    m[i] += a.w1 * (gi - m[i]);
    v[i] = a.b2 * v[i] + a.w2 * gi * gi;
    p[i] -= a.step_size * m[i] / (sqrtf(v[i]) / a.bc2_sqrt + a.eps);
  }
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdParams& h,
                bool first_step, const Stream& stream) {
  check_sgd_params(h);
  BRIGADE_CHECK(n >= 0, "sgd_update: n = " << n << " is negative");
  BRIGADE_CHECK(h.momentum == 0.0 || buf != nullptr, "sgd_update: momentum " << h.momentum
                                                         << " needs a momentum buffer, got null");
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  const float lr = static_cast<float>(h.lr), mu = static_cast<float>(h.momentum);
  const float keep = static_cast<float>(1.0 - h.dampening);
  const float wd = static_cast<float>(h.weight_decay);
  BRIGADE_LAUNCH(sgd_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(p, n), BRIGADE_EXTENT(g, n), BRIGADE_EXTENT(buf, n), n, lr, mu,
                 keep, wd, h.momentum != 0.0, h.nesterov, first_step);
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamParams& h,
                 int64_t step, const Stream& stream) {
  check_adam_params(h, step);
  BRIGADE_CHECK(n >= 0, "adam_update: n = " << n << " is negative");
  if (n == 0) return;
  const double t = static_cast<double>(step);
  const AdamScalars a{static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, t))),
                      static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t))),
                      static_cast<float>(1.0 - h.lr * h.weight_decay),
                      static_cast<float>(h.weight_decay),
                      static_cast<float>(1.0 - h.beta1),
                      static_cast<float>(h.beta2),
                      static_cast<float>(1.0 - h.beta2),
                      static_cast<float>(h.eps),
                      h.decoupled};
  BRIGADE_LAUNCH(adam_kernel, elementwise_blocks(n), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(p, n), BRIGADE_EXTENT(g, n), BRIGADE_EXTENT(m, n),
                 BRIGADE_EXTENT(v, n), n, a);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

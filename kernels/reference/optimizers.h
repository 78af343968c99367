// SGD and Adam/AdamW parameter updates, the reference: PyTorch's exact update rules
// (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW; no amsgrad, no maximize).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/optimizer_params.h"  // SgdParams, AdamParams, their checks

namespace brigade {

namespace ref {

// p, g, buf: (n). buf is the momentum buffer; on the first step PyTorch sets buf = g
// (no dampening) instead of decaying a zero buffer, hence `first_step`.
//   g' = g + wd·p;  buf = first ? g' : momentum·buf + (1 - dampening)·g'
//   d  = nesterov ? g' + momentum·buf : buf   (d = g' when momentum == 0)
//   p -= lr·d
template <class T>
void sgd_update(T* p, const T* g, T* buf, int64_t n, const SgdParams& h, bool first_step) {
  check_sgd_params(h);
  const T lr = T(h.lr), mu = T(h.momentum), keep = T(1.0 - h.dampening), wd = T(h.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (h.momentum != 0) {
      buf[i] = first_step ? d : mu * buf[i] + keep * d;
      d = h.nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

// p, g, m, v: (n); step t counts from 1. In the order of PyTorch's _single_tensor_adam:
//   Adam:  g' = g + wd·p          AdamW: p *= 1 - lr·wd, g' = g
//   m += (1-β1)·(g' - m)          (lerp, = β1·m + (1-β1)·g')
//   v = β2·v + (1-β2)·g'²
//   p -= (lr / (1 - β1^t)) · m / (sqrt(v) / sqrt(1 - β2^t) + eps)
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& h, int64_t step) {
  check_adam_params(h, step);
  const double t = static_cast<double>(step);
  const T step_size = T(h.lr / (1.0 - std::pow(h.beta1, t)));
  const T bc2_sqrt = T(std::sqrt(1.0 - std::pow(h.beta2, t)));
  const T decay = T(1.0 - h.lr * h.weight_decay), wd = T(h.weight_decay);
  const T w1 = T(1.0 - h.beta1), b2 = T(h.beta2), w2 = T(1.0 - h.beta2), eps = T(h.eps);
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if (h.decoupled) p[i] *= decay;
    else gi += wd * p[i];
    m[i] += w1 * (gi - m[i]);
    v[i] = b2 * v[i] + w2 * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

}  // namespace ref
}  // namespace brigade

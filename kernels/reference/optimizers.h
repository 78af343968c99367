// SGD and Adam/AdamW parameter updates, the reference: PyTorch's exact update rules
// (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW; no amsgrad, no maximize).
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace brigade {

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;  // L2: added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0, as in PyTorch
};

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;          // added to sqrt(v̂), outside the square root
  float weight_decay = 0.0f;
  bool decoupled = false;     // false: Adam (L2 in the gradient); true: AdamW (p *= 1 - lr·wd)
};

inline void check_sgd_params(const SgdParams& h) {
  if (!(h.lr >= 0) || !(h.momentum >= 0) || !(h.weight_decay >= 0) ||
      (h.nesterov && (h.momentum <= 0 || h.dampening != 0))) {
    std::ostringstream m;
    m << "sgd: invalid hyper-parameters lr=" << h.lr << " momentum=" << h.momentum
      << " dampening=" << h.dampening << " weight_decay=" << h.weight_decay
      << " nesterov=" << h.nesterov << " (Nesterov needs momentum > 0 and dampening 0)";
    throw std::invalid_argument(m.str());
  }
}

inline void check_adam_params(const AdamParams& h, int64_t step) {
  if (!(h.lr >= 0) || !(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1) ||
      !(h.eps >= 0) || !(h.weight_decay >= 0) || step < 1) {
    std::ostringstream m;
    m << "adam: invalid hyper-parameters lr=" << h.lr << " betas=(" << h.beta1 << ", "
      << h.beta2 << ") eps=" << h.eps << " weight_decay=" << h.weight_decay << " step=" << step
      << " (betas in [0, 1), step counts from 1)";
    throw std::invalid_argument(m.str());
  }
}

namespace ref {

// p, g, buf: (n). buf is the momentum buffer; on the first step PyTorch sets buf = g
// (no dampening) instead of decaying a zero buffer, hence `first_step`.
//   g' = g + wd·p;  buf = first ? g' : momentum·buf + (1 - dampening)·g'
//   d  = nesterov ? g' + momentum·buf : buf   (d = g' when momentum == 0)
//   p -= lr·d
template <class T>
void sgd_update(T* p, const T* g, T* buf, int64_t n, const SgdParams& h, bool first_step) {
  check_sgd_params(h);
  const T lr = h.lr, mu = h.momentum, damp = h.dampening, wd = h.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (h.momentum != 0) {
      buf[i] = first_step ? d : mu * buf[i] + (T(1) - damp) * d;
      d = h.nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

// p, g, m, v: (n); step t counts from 1.
//   Adam:  g' = g + wd·p          AdamW: p *= 1 - lr·wd, g' = g
//   m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²
//   p -= (lr / (1 - β1^t)) · m / (sqrt(v) / sqrt(1 - β2^t) + eps)
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& h, int64_t step) {
  check_adam_params(h, step);
  const T lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  // The bias corrections in double, as PyTorch computes them (Python floats), then cast.
  const double t = static_cast<double>(step);
  const T step_size = static_cast<T>(h.lr / (1.0 - std::pow(double(h.beta1), t)));
  const T bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(double(h.beta2), t)));
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if (h.decoupled) p[i] *= T(1) - lr * wd;
    else gi += wd * p[i];
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

}  // namespace ref
}  // namespace brigade

// The optimizers' hyper-parameters and their checks: the contract that the reference
// (kernels/reference/optimizers.h), the CPU and the CUDA updates and layers/optimizers.h share.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace brigade {

// Hyper-parameters in double, as a user writes them (Python floats in PyTorch). Each kernel
// derives its scalars the way PyTorch does (e.g. 1 - dampening, lr / (1 - beta1^t) in double)
// and only then rounds them to the tensor's type, so that float runs track PyTorch's closely.
struct SgdParams {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0, as in PyTorch
};

struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;          // added to sqrt(v̂), outside the square root
  double weight_decay = 0.0;
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

}  // namespace brigade

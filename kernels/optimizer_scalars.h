// The per-step scalars of SGD and of Adam: every value of an update that is the same for all
// elements — 1 - dampening, step_size = lr / (1 - β1^t), bc2_sqrt = sqrt(1 - β2^t),
// 1 - lr·wd, ... — derived once on the host, in double, and rounded to float, exactly as
// kernels/reference/optimizers.h derives them (kernels/cuda/optimizers.cu's kernels see only
// these floats).
//
// The per-tensor kernels take them by value. The multi-tensor kernels read them from device
// memory (ops::TensorTable's scalar words, written before each update by one stream-ordered
// copy): a launch captured in a CUDA graph then replays with each step's values, not with
// those of the step it was captured in.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/optimizer_params.h"

namespace brigade {

struct SgdScalars {
  float lr, mu, keep, wd;
  bool momentum, nesterov, first_step;
};

struct AdamScalars {
  float step_size, bc2_sqrt, decay, wd, w1, b2, w2, eps;
  bool decoupled;
};

// The float words a table keeps for either set (ops::TensorTable): room for the larger.
inline constexpr int64_t kUpdateScalarWords = 16;
static_assert(sizeof(SgdScalars) <= kUpdateScalarWords * sizeof(float) &&
              sizeof(AdamScalars) <= kUpdateScalarWords * sizeof(float));

inline SgdScalars sgd_scalars(const SgdParams& h, bool first_step) {
  return {static_cast<float>(h.lr), static_cast<float>(h.momentum),
          static_cast<float>(1.0 - h.dampening), static_cast<float>(h.weight_decay),
          h.momentum != 0.0, h.nesterov, first_step};
}

// step counts from 1.
inline AdamScalars adam_scalars(const AdamParams& h, int64_t step) {
  const double t = static_cast<double>(step);
  return {static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, t))),
          static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t))),
          static_cast<float>(1.0 - h.lr * h.weight_decay),
          static_cast<float>(h.weight_decay),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),
          h.decoupled};
}

}  // namespace brigade

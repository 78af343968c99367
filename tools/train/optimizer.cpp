#include "tools/train/optimizer.h"

#include <stdexcept>

#include "engine/error.h"
#include "kernels/ops.h"

namespace brigade::train {

CheckpointedSgd::CheckpointedSgd(std::vector<layers::Parameter*> params, SgdParams h)
    : CheckpointedOptimizer(std::move(params)), h_(h) {
  try {
    check_sgd_params(h_);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (h_.momentum != 0)
    for (layers::Parameter* p : params_)
      buf_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
}

void CheckpointedSgd::step(std::optional<Stream> stream) {
  for (size_t i = 0; i < params_.size(); ++i) {
    layers::Parameter& p = *params_[i];
    // Without momentum the buffer is never read: the gradient stands in for its shape.
    const Tensor& buf = h_.momentum != 0 ? buf_[i] : p.grad;
    ops::sgd_step(p.value, p.grad, buf, h_, steps_ == 0, stream_of(p, stream));
  }
  ++steps_;
}

std::vector<NamedTensor> CheckpointedSgd::state() {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < buf_.size(); ++i)
    out.push_back({"sgd.momentum." + params_[i]->name, buf_[i]});
  return out;
}

CheckpointedAdam::CheckpointedAdam(std::vector<layers::Parameter*> params, AdamParams h)
    : CheckpointedOptimizer(std::move(params)), h_(h) {
  try {
    check_adam_params(h_, 1);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  for (layers::Parameter* p : params_) {
    m_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
    v_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
  }
}

void CheckpointedAdam::step(std::optional<Stream> stream) {
  ++steps_;  // Adam's bias correction counts steps from 1
  for (size_t i = 0; i < params_.size(); ++i) {
    layers::Parameter& p = *params_[i];
    ops::adam_step(p.value, p.grad, m_[i], v_[i], h_, steps_, stream_of(p, stream));
  }
}

std::vector<NamedTensor> CheckpointedAdam::state() {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.push_back({"adam.m." + params_[i]->name, m_[i]});
    out.push_back({"adam.v." + params_[i]->name, v_[i]});
  }
  return out;
}

std::unique_ptr<CheckpointedOptimizer> make_optimizer(const Options& o,
                                                      std::vector<layers::Parameter*> params) {
  if (o.optimizer == "sgd")
    return std::make_unique<CheckpointedSgd>(
        std::move(params), SgdParams{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  return std::make_unique<CheckpointedAdam>(
      std::move(params), AdamParams{.lr = o.lr, .weight_decay = o.weight_decay});
}

}  // namespace brigade::train

#include "layers/optimizers.h"

#include <stdexcept>

#include "kernels/ops.h"

namespace brigade::layers {

void Optimizer::zero_grad(std::optional<Stream> stream) {
  for (Parameter* p : params_) ops::fill(p->grad, 0.0f, stream_of(*p, stream));
}

SGD::SGD(std::vector<Parameter*> params, SgdParams h) : Optimizer(std::move(params)), h_(h) {
  try {
    check_sgd_params(h_);  // at construction, where the user wrote them
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  if (h_.momentum != 0)
    for (Parameter* p : params_) buf_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
}

void SGD::step(std::optional<Stream> stream) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    // Without momentum the buffer is never read: pass the gradient as a stand-in of its shape.
    const Tensor& buf = h_.momentum != 0 ? buf_[i] : p.grad;
    ops::sgd_step(p.value, p.grad, buf, h_, steps_ == 0, stream_of(p, stream));
  }
  ++steps_;
}

std::vector<NamedTensor> SGD::state() {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < buf_.size(); ++i)
    out.push_back({std::string(kMomentumPrefix) + params_[i]->name, buf_[i]});
  return out;
}

Adam::Adam(std::vector<Parameter*> params, AdamParams h) : Optimizer(std::move(params)), h_(h) {
  try {
    check_adam_params(h_, 1);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  for (Parameter* p : params_) {
    m_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
    v_.push_back(Tensor::zeros(p->value.shape(), p->value.stream()));
  }
}

void Adam::step(std::optional<Stream> stream) {
  ++steps_;  // Adam's bias correction counts steps from 1
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    ops::adam_step(p.value, p.grad, m_[i], v_[i], h_, steps_, stream_of(p, stream));
  }
}

std::vector<NamedTensor> Adam::state() {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.push_back({std::string(kFirstMomentPrefix) + params_[i]->name, m_[i]});
    out.push_back({std::string(kSecondMomentPrefix) + params_[i]->name, v_[i]});
  }
  return out;
}

}  // namespace brigade::layers

#include "layers/optimizers.h"

#include <stdexcept>

#include "kernels/ops.h"

namespace brigade::layers {

std::optional<Stream> Optimizer::one_gpu_stream(const std::optional<Stream>& stream) const {
  if (params_.empty()) return std::nullopt;
  const Stream first = stream_of(*params_[0], stream);
  if (!first.device().is_cuda()) return std::nullopt;
  for (const Parameter* p : params_)
    if (!(stream_of(*p, stream) == first) || p->value.device() != first.device())
      return std::nullopt;
  return first;
}

const ops::TensorTable& Optimizer::table_of(ops::TensorTable& kept,
                                            std::vector<ops::TensorTable::Row> rows,
                                            const Stream& stream) {
  if (kept.empty() || !kept.holds(rows)) kept = ops::TensorTable(std::move(rows), stream);
  return kept;
}

const ops::TensorTable& Optimizer::grads_table(const Stream& gpu) {
  std::vector<ops::TensorTable::Row> rows;
  for (Parameter* p : params_) rows.push_back({p->grad, Tensor(), Tensor(), Tensor()});
  return table_of(grads_, std::move(rows), gpu);
}

void Optimizer::zero_grad(std::optional<Stream> stream) {
  if (const std::optional<Stream> gpu = one_gpu_stream(stream)) {
    ops::fill_all(grads_table(*gpu), 0.0f, *gpu);
    return;
  }
  for (Parameter* p : params_) ops::fill(p->grad, 0.0f, stream_of(*p, stream));
}

void Optimizer::prepare_zero_grad(const Stream& gpu) {
  if (one_gpu_stream(gpu)) grads_table(gpu);
}

void Optimizer::step_unless_failed(const Stream& gpu, const Tensor& verdict) {
  // Without parameters there is nothing to update (a stage of pooling alone): only the count.
  BRIGADE_CHECK(params_.empty() || one_gpu_stream(gpu).has_value(),
                kind() << ": an update that obeys a step's verdict needs every parameter on "
                       << gpu.str() << "'s GPU");
  update(gpu, verdict);
}

void Optimizer::prepare_update(const Stream& gpu) {
  BRIGADE_CHECK(params_.empty() || one_gpu_stream(gpu).has_value(),
                kind() << ": an update captured in a CUDA graph needs every parameter on "
                       << gpu.str() << "'s GPU");
  if (params_.empty()) {
    ++steps_;  // nothing to update: only the count, as update() does
    return;
  }
  prepare_update_on(gpu);
}

void Optimizer::launch_update(const Stream& gpu, const Tensor& verdict) {
  if (!params_.empty()) launch_update_on(gpu, verdict);
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

void SGD::update(const std::optional<Stream>& stream, const Tensor& verdict) {
  if (const std::optional<Stream> gpu = one_gpu_stream(stream)) {
    prepare_update_on(*gpu);
    launch_update_on(*gpu, verdict);
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    // Without momentum the buffer is never read: pass the gradient as a stand-in of its shape.
    const Tensor& buf = h_.momentum != 0 ? buf_[i] : p.grad;
    ops::sgd_step(p.value, p.grad, buf, h_, steps_ == 0, stream_of(p, stream));
  }
  ++steps_;
}

void SGD::prepare_update_on(const Stream& gpu) {
  std::vector<ops::TensorTable::Row> rows;
  for (size_t i = 0; i < params_.size(); ++i)
    rows.push_back({params_[i]->value, params_[i]->grad, h_.momentum != 0 ? buf_[i] : Tensor(),
                    Tensor()});
  ops::write_sgd_scalars(table_of(table_, std::move(rows), gpu), h_, steps_ == 0, gpu);
  ++steps_;
}

void SGD::launch_update_on(const Stream& gpu, const Tensor& verdict) {
  ops::launch_sgd_all(table_, h_, verdict, gpu);
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

void Adam::update(const std::optional<Stream>& stream, const Tensor& verdict) {
  if (const std::optional<Stream> gpu = one_gpu_stream(stream)) {
    prepare_update_on(*gpu);
    launch_update_on(*gpu, verdict);
    return;
  }
  ++steps_;  // Adam's bias correction counts steps from 1
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    ops::adam_step(p.value, p.grad, m_[i], v_[i], h_, steps_, stream_of(p, stream));
  }
}

void Adam::prepare_update_on(const Stream& gpu) {
  ++steps_;  // Adam's bias correction counts steps from 1
  std::vector<ops::TensorTable::Row> rows;
  for (size_t i = 0; i < params_.size(); ++i)
    rows.push_back({params_[i]->value, params_[i]->grad, m_[i], v_[i]});
  ops::write_adam_scalars(table_of(table_, std::move(rows), gpu), h_, steps_, gpu);
}

void Adam::launch_update_on(const Stream& gpu, const Tensor& verdict) {
  ops::launch_adam_all(table_, verdict, gpu);
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

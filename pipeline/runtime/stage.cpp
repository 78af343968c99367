#include "pipeline/runtime/stage.h"

#include <utility>

#include "engine/error.h"

namespace brigade::pipeline {

Stage::Stage(int index, int count, layers::Sequential& model, StageRange layers,
             std::unique_ptr<layers::Optimizer> optimizer, GradientReducer* reducer)
    : index_(index),
      count_(count),
      model_(model),
      layers_(layers),
      optimizer_(std::move(optimizer)),
      reducer_(reducer) {
  BRIGADE_CHECK(optimizer_ != nullptr, "stage " << index << ": the optimizer factory made none");
}

layers::ForwardContext Stage::context(const StepInputs& step, int mb, const Stream& compute) const {
  layers::ForwardContext ctx;
  ctx.seed = step.seed;
  ctx.step = step.step;
  ctx.sample_offset = step.first_sample[static_cast<size_t>(mb)];  // dropout: the sample's place
  ctx.streams = {{compute.device(), compute}};
  if (const auto word = step.step_words.find(compute.id()); word != step.step_words.end())
    ctx.step_word = word->second;
  return ctx;
}

Tensor Stage::forward(const Tensor& x, MicroBatchWork& work, const StepInputs& step, int mb,
                      bool recompute, const Stream& compute) const {
  layers::ForwardContext ctx = context(step, mb, compute);
  if (recompute) {
    work.input = x;  // the forward below records nothing: its activations go at once
  } else {
    work.tape = std::make_unique<layers::Tape>();
    ctx.tape = work.tape.get();
  }
  return model_.forward(x, ctx, layers_.begin, layers_.end);
}

// GPipe's re-materialisation: the same forward again (same seed, step and sample offset, so
// the same dropout masks), this time with a tape.
void Stage::recompute_tape(MicroBatchWork& work, const StepInputs& step, int mb,
                           const Stream& compute) const {
  work.tape = std::make_unique<layers::Tape>();
  layers::ForwardContext ctx = context(step, mb, compute);
  ctx.tape = work.tape.get();
  model_.forward(work.input, ctx, layers_.begin, layers_.end);
  work.input = Tensor();
}

Tensor Stage::backward_input(MicroBatchWork& work, const StepInputs& step, int mb, bool recompute,
                             const Stream& compute) const {
  if (recompute) recompute_tape(work, step, mb, compute);
  BRIGADE_CHECK(work.tape != nullptr, "stage " << index_ << " micro-batch " << mb << ": no tape");
  return work.tape->backward_input(work.dy, /*need_input_grad=*/!first());
}

void Stage::backward_weight(MicroBatchWork& work) const {
  BRIGADE_CHECK(work.tape != nullptr, "stage " << index_ << ": W without its B");
  work.tape->backward_params(work.dy);
  work.tape.reset();  // both halves ran: the micro-batch leaves nothing on this stage
  work.dy = Tensor();
}

Tensor Stage::backward(MicroBatchWork& work, const StepInputs& step, int mb, bool recompute,
                       const Stream& compute) const {
  if (recompute) recompute_tape(work, step, mb, compute);
  BRIGADE_CHECK(work.tape != nullptr, "stage " << index_ << " micro-batch " << mb << ": no tape");
  Tensor dx = work.tape->backward(work.dy, /*need_input_grad=*/!first());
  work.tape.reset();
  work.dy = Tensor();
  return dx;
}

void Stage::zero_grad(const Stream& compute) {
  if (!update_graph_.zeroed(compute)) optimizer_->zero_grad(compute);
}

std::vector<layers::Parameter*> Stage::parameters() const {
  return model_.parameters(layers_.begin, layers_.end);
}

void Stage::reduce(const Stream& compute) const {
  if (!reducer_) return;
  std::vector<Tensor> grads;  // every parameter's gradient, in layer order
  for (layers::Parameter* p : parameters()) grads.push_back(p->grad);
  reducer_->sum(grads, compute);
}

void Stage::abandon_reduction(const std::string& why) const {
  if (reducer_) reducer_->abandon(why);
}

void Stage::step(const Stream& compute, const Tensor& verdict, bool graph) {
  if (graph && verdict.defined() && optimizer_->has_parameters())
    update_graph_.run(*optimizer_, compute, verdict);
  else if (verdict.defined())
    optimizer_->step_unless_failed(compute, verdict);
  else
    optimizer_->step(compute);
}

}  // namespace brigade::pipeline

// Stage: one slice of the model — layers [begin, end) of a Sequential — on one device, with
// what it needs to learn: its optimizer and, when replicas train copies of the pipeline, the
// reducer that sums its gradients across them. The runtime's executor (executor.cpp) calls
// these methods for a list's compute instructions; a Stage knows nothing of schedules,
// threads or links.
//
// What a micro-batch leaves on a stage between its actions is not stored here but in that
// micro-batch's MicroBatchWork (step_state.h), passed in: the tape from F until the backward
// has used it (or, recomputing, the stage's input), and the output gradient from B until W.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "pipeline/runtime/gradient_reducer.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/runtime/step_state.h"
#include "pipeline/runtime/update_graph.h"

namespace brigade::pipeline {

class Stage {
 public:
  // `reducer` may be null (one replica). The optimizer updates exactly this stage's parameters.
  Stage(int index, int count, layers::Sequential& model, StageRange layers,
        std::unique_ptr<layers::Optimizer> optimizer, GradientReducer* reducer);

  int index() const { return index_; }
  bool first() const { return index_ == 0; }
  bool last() const { return index_ == count_ - 1; }
  layers::Optimizer& optimizer() const { return *optimizer_; }

  // F: the stage's layers on x (rows, ...) for micro-batch `mb`, on `compute`; returns y.
  // Records a tape in `work` — or, with `recompute`, keeps only x and records nothing, so
  // the activations go at once and the backward does this forward again.
  Tensor forward(const Tensor& x, MicroBatchWork& work, const StepInputs& step, int mb,
                 bool recompute, const Stream& compute) const;
  // B: the gradient of the stage's input from work.dy (none for the first stage, whose input
  // is data); keeps the tape and dy for W.  W: the weight gradients, added into each
  // parameter's .grad; releases the tape and dy.  BW: both in one walk over the layers.
  Tensor backward_input(MicroBatchWork& work, const StepInputs& step, int mb, bool recompute,
                        const Stream& compute) const;
  void backward_weight(MicroBatchWork& work) const;
  Tensor backward(MicroBatchWork& work, const StepInputs& step, int mb, bool recompute,
                  const Stream& compute) const;

  // The stage's gradients to zero, unless the last step's update graph did it on `compute`.
  void zero_grad(const Stream& compute);
  // After the step's last W of this stage was enqueued on `compute`: the sum of its gradients
  // across replicas (when there is a reducer); then, once any clipping has scaled them, the
  // optimizer step.
  void reduce(const Stream& compute) const;
  // Instead of reduce(), when the step failed first: the replicas must not wait for this one.
  void abandon_reduction(const std::string& why) const;
  // `verdict`: the step's verdict on this GPU (step_verdict.h), or undefined: the update then
  // runs unconditionally (the host path has already checked). `graph` (with a verdict only):
  // the update and the next step's zeroing as one CUDA graph (update_graph.h).
  void step(const Stream& compute, const Tensor& verdict, bool graph);
  std::vector<layers::Parameter*> parameters() const;

 private:
  layers::ForwardContext context(const StepInputs& step, int mb, const Stream& compute) const;
  void recompute_tape(MicroBatchWork& work, const StepInputs& step, int mb,
                      const Stream& compute) const;

  int index_, count_;
  layers::Sequential& model_;
  StageRange layers_;
  std::unique_ptr<layers::Optimizer> optimizer_;
  GradientReducer* reducer_;
  UpdateGraph update_graph_;
};

}  // namespace brigade::pipeline

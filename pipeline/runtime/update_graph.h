// One stage's update as a CUDA graph (RuntimeOptions::cuda_graphs): the optimizer's
// multi-tensor update obeying the step's verdict (step_verdict.h), then the stage's gradients
// zeroed for the next step — two launches, captured once on the stage's compute stream and
// replayed at every step as one cudaGraphLaunch (engine/cuda_graph.h).
//
// A replay repeats the captured launches exactly, addresses and grids included. Why each
// input is where the graph left it:
//   - the update's table and the gradients' table (ops::TensorTable): made by the optimizer
//     at its first update and kept while its tensors are the same. A parameter or gradient
//     given new storage (a tensor replaced) makes both again, before the capture
//     (prepare_update, prepare_zero_grad: a table's making allocates, which a capture must
//     not), with other ids (Optimizer::launch_tables): the graph is then captured again;
//   - the parameters, gradients and optimizer state those tables point to: the tensors the
//     tables hold, which keep them alive (a checkpoint loads into them, in place);
//   - the step's scalars (the learning rate, Adam's bias corrections, SGD's first step): in
//     the update table's device memory, copied there before each launch from page-locked
//     memory (Optimizer::prepare_update), so a learning-rate schedule needs no new capture;
//   - the step's verdict: the StepVerdict's table is made per step, so its words are copied
//     (one device-to-device copy) into verdict_, the graph's own, which the update reads.
// Per stage and step: two small copies and one graph launch, in place of a copy and two
// kernel launches.
//
// The gradients are zeroed by the graph after the update instead of at the next step's
// start: zeroed() says so, and the stage skips its own zeroing on that stream. A failed step
// changes nothing: the update obeys the verdict; the gradients are zeroed either way.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "engine/cuda_graph.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "layers/optimizers.h"

namespace brigade::pipeline {

class UpdateGraph {
 public:
  // Enqueues on `compute` (a CUDA stream of every parameter's GPU): the scalars' copy, the
  // verdict's copy (verdict: the step's table on that GPU, int32 words), and the graph,
  // captured first when there is none or the optimizer's tables changed.
  void run(layers::Optimizer& optimizer, const Stream& compute, const Tensor& verdict);
  // True when the last run zeroed the gradients on `compute` (the same stream, alive).
  bool zeroed(const Stream& compute) const;

 private:
  std::optional<CudaGraph> graph_;
  std::array<uint64_t, 2> tables_{};  // the optimizer's launch_tables() the graph holds
  Tensor verdict_;                    // (devices) int32: the step's verdict, for the graph
  Stream::Weak zeroed_on_;            // the stream of the last run
};

}  // namespace brigade::pipeline

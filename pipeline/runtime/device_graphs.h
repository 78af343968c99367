// A device's compute actions as CUDA graphs (RuntimeOptions::cuda_graphs): each F, B, W or BW
// of each (stage, micro-batch) on the device captured once and replayed at every later step
// as one cudaGraphLaunch, in place of its dozens of kernel launches and library calls.
//
// A replay repeats the captured work exactly, addresses included, so everything an action
// reads or writes must lie where it lay at the capture. Why each thing does:
//   - what the action allocates (activations, the tape, its outputs): the capture is served
//     from one arena set aside before the step's first capture (engine/graph_memory.h), at
//     offsets planned from what the eager step before asked for and when it freed it: one
//     GraphPool per device, in which the bytes of a tensor freed earlier in the step (a tape
//     after its backward, an output its consumer is done with) serve later requests, so the
//     graphs hold what the eager step had live at its peak. A replayed action's outputs are
//     the tensors its capture returned, handed out again: their values are valid until the
//     step frees them, as in the eager step;
//   - what the action reads that another action wrote (`moving` below: the stage's input,
//     the labels, the output gradient): where that is the output of an action before it on
//     this device (the stage before, or the loss, on the same GPU), read in place, where the
//     replay of that action writes it; what arrives from elsewhere (another
//     device, the batch) is copied first into the graph's own tensor, one copy each, known to
//     hold bf16 values when what it copies is (engine/tensor.h);
//   - the parameters and their gradients, the device's verdict word (step_verdict.h), and the
//     word the dropout kernels read the step's number from (layers/tape.h): tensors that live
//     across steps, written in place. Their addresses are part of the Key, with everything
//     else the captured work was decided by (the micro-batches' rows, the loss's scale, the
//     precision, the CUDA path and math mode, the stream), so that graphs are replayed only in
//     a step that would enqueue the very same work.
// What the host learns of a replayed action it learns as of the eager one: the verdict's
// notes of its checks are made again (StepVerdict::note); the loss's tally row is the graph's
// own, copied into the step's by the executor.
//
// The phases of a device, decided at its step's start for all of its actions (begin):
//   size      a Key not seen before: the actions run eagerly, their requests traced;
//   capture   the Key sized at the step before: each action is captured in list order, then
//             launched (a fresh pool: the graphs of another Key go);
//   replay    the Key captured: each action's graph is launched.
// A run's first step is eager, its second captures, every later one replays. A step with
// another Key (the smaller last batch of an epoch) is sized eagerly and leaves the graphs as
// they were, so that the next step like the ones before replays them. A step that fails
// midway leaves the phase to be decided again (the Runtime drops every graph when it makes
// fresh streams). The same bits every way: the graphs hold the eager kernels. Only the
// device's thread touches its graphs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "engine/graph_memory.h"
#include "engine/cuda_graph.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "pipeline/runtime/step_verdict.h"
#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

enum class GraphPhase { size, capture, replay };

class DeviceGraphs {
 public:
  // Everything the captured work depends on, flattened to numbers (executor.cpp makes it).
  using Key = std::vector<uint64_t>;

  // At the start of the device's step, on `compute` (its compute stream): this step's phase.
  GraphPhase begin(const Key& key, const Stream& compute);

  // Action `a`, enqueued on `compute` by `enqueue(inputs)`, which returns what the action
  // leaves for the host (its outputs, possibly undefined tensors). `moving`: what it reads
  // that lies elsewhere each step; `enqueue` is given those, or the graph's copies of them.
  // `verdict`, `d`: the step's verdict and the device, whose notes are kept and made again.
  std::vector<Tensor> run(const Action& a, const Stream& compute, const std::vector<Tensor>& moving,
                          const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& enqueue,
                          StepVerdict& verdict, int d);

  // After the device's whole list: the phase's work is complete.
  void end();

 private:
  using ActionKey = std::tuple<int, int, int>;  // (stage, op, micro-batch)
  struct ActionGraph {
    std::optional<CudaGraph> graph;
    // What the graph reads of the moving tensors: its copy, or (read_in_place) the range
    // another graph's replay writes them to, unleased (engine/graph_memory.h).
    std::vector<Tensor> inputs;
    std::vector<bool> read_in_place;
    std::vector<Tensor> outputs;            // what the capture's enqueue returned, unleased
    std::vector<StepVerdict::Check> notes;  // the verdict's notes of its checks
  };
  static ActionKey key_of(const Action& a) {
    return {a.stage, static_cast<int>(a.op), a.microbatch};
  }

  GraphPhase phase_ = GraphPhase::size;
  Key key_;  // this step's
  std::optional<Key> sized_key_, captured_key_;
  std::shared_ptr<AllocationTrace> trace_;  // the size phase's requests, while it runs
  GraphMemoryPlan plan_;                    // the graphs' memory, from the last size phase
  std::map<ActionKey, ActionGraph> graphs_;
  std::optional<GraphPool> pool_;  // the captured graphs' memory
};

}  // namespace brigade::pipeline

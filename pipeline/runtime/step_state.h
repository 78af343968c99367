// What one training step knows, passed to the executor and the stages as an argument rather
// than kept in the Runtime: made when the step starts, dropped when it returns.
//
//   StepInputs      read-only for the whole step: its number, the seed, the micro-batches as
//                   staged on the first and last stages' devices, where each starts in the
//                   mini-batch, and the mini-batch size every sample's loss is divided by.
//   MicroBatchWork  one (stage, micro-batch): the tensors that wait on that stage between
//                   two of the micro-batch's instructions. Only the thread of the stage's
//                   device touches it during the step (a neighbour on the same device hands
//                   over through it too, on that same thread).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/tensor.h"
#include "layers/tape.h"

namespace brigade::pipeline {

struct StepInputs {
  uint32_t step = 0;                 // the mini-batch's number: dropout masks are keyed by it
  uint64_t seed = 0;                 // the run's seed (dropout masks)
  int64_t batch_size = 0;            // the whole mini-batch, all replicas: each sample weighs 1/n
  std::vector<Tensor> inputs;        // [micro-batch] (rows_i, ...) on the first stage's device
  std::vector<Tensor> labels;        // [micro-batch] (rows_i) int32, on the last stage's device
  std::vector<int64_t> first_sample; // [micro-batch] its first sample's place in the mini-batch
  std::vector<int64_t> rows;         // [micro-batch] its rows (samples)
  // By the id of each compute stream whose actions are CUDA graphs: a (1) tensor on its GPU
  // whose 4 bytes hold `step` (a uint32), which dropout reads (ForwardContext::step_word; device_graphs.h). By
  // stream, not GPU: every schedule device has its own, also when two share a GPU.
  std::map<uint64_t, Tensor> step_words;
};

struct MicroBatchWork {
  Tensor input;   // the stage's input: received, or handed over by the stage before on this
                  // device; until F (recomputation: until B)
  std::unique_ptr<layers::Tape> tape;  // from F (or the recomputation) until the backward is done
  Tensor output;  // F's result, until it is sent (SF) or handed to the next stage here
  Tensor dy;      // the output gradient: received, from the loss, or handed back; until W
  Tensor dx;      // B's input gradient, until it is sent (SB) or handed back here
};

// [stage][micro-batch]
using StepWork = std::vector<std::vector<MicroBatchWork>>;

}  // namespace brigade::pipeline

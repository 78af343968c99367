// Step memory: what one training step of a plan holds on each device at its worst instant,
// estimated before anything is allocated, so that a step that cannot fit is refused in a second
// instead of failing mid-run (brigade-train's preflight compares it with each device's memory).
//
//   activations  a stage's micro-batch: what a probe of the stage's step measures per sample
//                where a CPU device trains (taped activations, gradients, workspace), times a
//                micro-batch's rows; a device holds its micro-batches in flight at the
//                schedule's worst instant (the simulator's dry run of the plan's lists), and a
//                CPU device one more (the action its host thread issues ahead)
//   parameters   its stages' values and gradients, and the optimizer's state for each
//   staged       the staging area's two mini-batches: images on the first stage's device,
//                labels on the last's
//   workspace    on a GPU, what its streams keep for GEMMs, and on the hand-written path the
//                largest convolution lowering a call takes (kernels/cuda/stream_workspace.h)
//
// On CPU devices an upper bound of the step's peak (tests/tools/train/memory_test.cpp holds it
// against the measured peaks, within a factor of 3); on GPUs alone a lower bound (the layers'
// outputs and the workspaces above, not cuDNN's: a run close to a GPU's limit may still fail,
// naming the device).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"

namespace brigade::pipeline {

// Bytes of float32 one sample keeps alive during a training step, at least: the input, every
// layer's output of [begin, end) (kept by the tape for the backward) and the largest of them
// once more (the gradient flowing back through it).
uint64_t activation_bytes_per_sample(const model::ModelShapes& shapes, size_t begin, size_t end);
// Bytes of the parameters of layers [begin, end) with their gradients and `states` optimizer
// tensors each (Adam 2, SGD with momentum 1, without 0).
uint64_t parameter_bytes(const model::ModelShapes& shapes, size_t begin, size_t end, int states);
// [stage]: the bytes a micro-batch of `rows` holds in each stage of `cut`, measured rather than
// guessed: the whole model on a scratch CPU device, each stage's step on `rows` rows of zeros —
// its input, its forward with a tape, the loss (the last stage), its backward with the input
// gradient it sends back (every stage but the first). The stream is held until the step is
// described, so every tensor of it is alive at once: the taped activations, the gradients, the
// kernels' workspace (a convolution's lowered input is often larger than its output). The most
// a micro-batch's step can hold, and the same in every run. Empty when the probe itself would
// be too large for this machine.
std::vector<uint64_t> measured_stage_bytes(const model::ModelSpec& spec, const Partition& cut,
                                           int64_t rows, uint64_t seed);
// This machine's physical memory.
uint64_t machine_memory_bytes();

// What one step asks of one device at its worst instant.
struct DeviceLoad {
  Device device;
  uint64_t activation_bytes = 0;  // the activations it keeps (its micro-batches in flight)
  uint64_t parameter_bytes = 0;   // its parameters, their gradients, the optimizer state
  uint64_t staged_bytes = 0;      // the staging area's two mini-batches (images or labels;
                                  // on a GPU the images' bytes too, decoded there)
  uint64_t workspace_bytes = 0;   // what its streams keep for GEMMs (a GPU's cuBLAS workspace,
                                  // or the hand-written split-K scratch, where its stages run
                                  // GEMMs: its stream's and an evaluation's; stream_workspace.h)
  uint64_t lowering_bytes = 0;    // on a GPU's hand-written path, the largest im2col columns a
                                  // convolution call of its stream takes for a micro-batch
                                  // (stream_workspace.h); a CPU's are in its probed activations
  uint64_t bytes() const {
    return activation_bytes + parameter_bytes + staged_bytes + workspace_bytes + lowering_bytes;
  }
};

// [stage]: what step_loads weighs a stage's micro-batch of `rows` by: where a CPU device
// trains, measured_stage_bytes (the model built from `seed`), at least the analytic
// activation_bytes_per_sample x rows; on GPUs alone (where the CPU's probe says nothing) the
// analytic bytes, a lower bound.
std::vector<uint64_t> stage_bytes(const model::ModelSpec& spec, const Plan& plan, int64_t rows,
                                  uint64_t seed);

// [device]: the load of each of the plan's devices, for a step of `step_rows` samples cut into
// the plan's micro-batches, `optimizer_states` tensors per parameter (parameter_bytes). A
// device's activations: its micro-batches in flight at the schedule's worst instant, each of
// its stage's stage_bytes; on a CPU device one micro-batch more, the action its host
// thread has issued ahead of the one running (executor.cpp). Pipeline devices that name one
// device (stages sharing a GPU) each have their entry: sum them to weigh it.
std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states, uint64_t seed);
// The same with each stage's micro-batch weighed by `bytes` ([stage], stage_bytes of the plan's
// cut at the step's largest micro-batch): plans that cut the model alike and differ in their
// lists only (zb-auto within other bounds) are weighed without probing again.
std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states,
                                   const std::vector<uint64_t>& bytes);
}  // namespace brigade::pipeline

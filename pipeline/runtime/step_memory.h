// Step memory: what one training step of a plan holds on each device at its worst instant,
// estimated before anything is allocated, so that a step that cannot fit is refused in a second
// instead of failing mid-run (brigade-train's preflight compares it with each device's memory).
//
//   activations  a stage's micro-batch: the analytic bytes per sample of its layers, scaled by
//                what a probe step measures where a CPU device trains, times a micro-batch's
//                rows; a device holds its micro-batches in flight at the schedule's worst
//                instant (the simulator's dry run of the plan's lists)
//   parameters   its stages' values and gradients, and the optimizer's state for each
//   staged       the staging area's two mini-batches: images on the first stage's device,
//                labels on the last's
//
// An estimate: a run close to a device's limit may still fail, naming the device.
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
// Bytes one more sample adds to a training step's peak, measured rather than guessed: the
// whole model on a scratch CPU device, a forward with a tape, the loss and the backward on a
// few rows of zeros and then on more; the slope of the allocator's peak. It counts what the
// analytic activation_bytes_per_sample does not (gradients, saved masks, allocator rounding):
// about 2.5x that for the question's network. 0 when the probe itself would be too large. A
// measurement: the peak depends on how far the host runs ahead of the device's stream (a
// tensor is freed when its last task has run), so it varies a little between runs, and on a
// loaded machine it can come out below the analytic bytes (step_loads never scales below them).
uint64_t measured_bytes_per_sample(const model::ModelSpec& spec, uint64_t seed);
// This machine's physical memory.
uint64_t machine_memory_bytes();

// What one step asks of one device at its worst instant.
struct DeviceLoad {
  Device device;
  uint64_t activation_bytes = 0;  // the activations it keeps (its micro-batches in flight)
  uint64_t parameter_bytes = 0;   // its parameters, their gradients, the optimizer state
  uint64_t staged_bytes = 0;      // the staging area's two mini-batches (images or labels)
};

// [device]: the load of each of the plan's devices, for a step of `step_rows` samples cut into
// the plan's micro-batches, `optimizer_states` tensors per parameter (parameter_bytes). Where a
// CPU device trains, the activations are scaled by measured_bytes_per_sample (the model built
// from `seed`); on GPUs alone by nothing (the analytic bytes, a lower bound). Pipeline devices
// that name one device (stages sharing a GPU) each have their entry: sum them to weigh it.
std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states, uint64_t seed);

}  // namespace brigade::pipeline

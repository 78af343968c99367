// The memory check of brigade-train's preflight: one step of the plan weighed on each device
// (pipeline/runtime/step_memory.h) against its memory (preflight.h: step_refusal). A step that
// cannot fit is refused before anything is allocated, and the refusal ends with this run's own
// command changed so that it fits (suggested_command.h, checked by parse_options), e.g.
//
//   brigade-train: --batch 48: cpu:0 would hold about 56.9 MiB (...) but has 24.0 MiB
//   (--device-memory); with more micro-batches it fits:
//     build/tools/brigade-train ... --batch 48 --microbatches 16
//
// What it tries, in order: more --microbatches, the fewest that fit of counts a quarter apart
// (the same step cut finer: the same parameters after it, and each micro-batch in flight
// smaller), then a smaller --batch, a fifth less at a time (with the micro-batches the run
// has); each a count the epoch's
// batches allow (every batch, the short last one too, holds a row per micro-batch). Where
// neither fits (the parameters alone are too large), the refusal says to use more devices or
// more memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/step_memory.h"
#include "tools/train/options.h"

namespace brigade::train {

// What an epoch's batches are: the rows of its first (the step weighed) and the samples of
// the data set (its last batch is what is left: a batch of `batch` must leave 0 or at least a
// row per micro-batch).
struct EpochBatches {
  int64_t first_rows = 0;
  int64_t samples = 0;
};

// Throws UsageError (exit status 2) with the command that fits when a step of `plan` (made from
// `request`) cannot; else returns the step's load on each device (one entry per device:
// loads_per_device), what the run announces.
std::vector<pipeline::DeviceLoad> check_memory(const Options& options,
                                               const model::ModelSpec& spec,
                                               const pipeline::PlanRequest& request,
                                               const pipeline::Plan& plan,
                                               const EpochBatches& batches);

// "memory of a step, estimated: cpu:0 16.2 MiB, cpu:1 7.1 MiB" (each device's activations,
// parameters with their gradients and optimizer state, and staged batches).
std::string describe_loads(const std::vector<pipeline::DeviceLoad>& loads);

}  // namespace brigade::train

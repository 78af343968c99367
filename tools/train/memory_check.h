// The memory check of brigade-train's preflight: one step of the plan weighed on each device
// (pipeline/runtime/step_memory.h) against its memory (preflight.h: step_refusal). A step that
// cannot fit is refused before anything is allocated, and the refusal ends with this run's own
// command changed so that it fits (suggested_command.h, checked by parse_options), e.g.
//
//   brigade-train: --batch 48: cpu:0 would hold about 56.9 MiB (...) but has 24.0 MiB
//   (--device-memory); with more micro-batches it fits:
//     build/tools/brigade-train ... --batch 48 --microbatches 16
//
// zb-auto comes first: it plans its lists within bounds of micro-batches held per device
// (plan.h), and where --max-activations gives none and its step as planned cannot fit, the run
// takes the largest bounds that fit (check_memory, below) instead of being refused: the same
// step, in an order that holds less, said on the run's memory line.
//
// Else what it tries, in order: more --microbatches, the fewest that fit of counts a quarter
// apart (the same step cut finer: the same parameters after it, and each micro-batch in flight
// smaller), then a smaller --batch, a fifth less at a time (with the micro-batches the run
// has); each a count the epoch's batches allow (every batch, the short last one too, holds a
// row per micro-batch). Where neither fits (the parameters alone are too large), or the run is a
// --resume (whose checkpoint's recipe fixes both), the refusal says to use more devices or
// more memory.
#pragma once

#include <cstdint>
#include <optional>
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

// A step that fits: its load on each device, and the plan it fits with when that is not the
// plan asked (zb-auto within bounds of its devices' memory).
struct FittedStep {
  std::vector<pipeline::DeviceLoad> loads;  // one entry per device: loads_per_device
  std::optional<pipeline::Plan> replanned;  // zb-auto within `bounds`: the plan to run
  std::vector<int> bounds;                  // [device]: its micro-batches held at most
};

// Throws UsageError (exit status 2) with the command that fits when a step of `plan` (made from
// `request`) cannot, and zb-auto within bounds cannot either; else returns the step that fits,
// what the run announces.
//
// zb-auto's bounds, for a `request` of schedule zb-auto with no --max-activations whose `plan`
// (at most p micro-batches per device, plan.cpp) holds more than a device's memory: one bound
// for every device, the largest that fits counting down from the most a device holds in
// `plan`; then one device's bound one more at a time, in device order, while the step still
// fits, until no device's can be (a device with memory to spare holds more, and the schedule
// waits less). Each bound is what --max-activations would ask. The plans weighed are cut as
// `plan` is, from its work (nothing is profiled again).
FittedStep check_memory(const Options& options, const model::ModelSpec& spec,
                        const pipeline::PlanRequest& request, const pipeline::Plan& plan,
                        const EpochBatches& batches);

// check_memory's verdict alone, without the search for a command that fits: whether a step of
// `plan` (made from `request`) fits each device's memory as planned, or, where `request` is
// zb-auto's without bounds, within bounds that fit (which the run then finds itself). What a
// command is weighed by before it is suggested: check_memory refuses it exactly when this is
// false.
bool step_fits(const Options& options, const model::ModelSpec& spec,
               const pipeline::PlanRequest& request, const pipeline::Plan& plan,
               const EpochBatches& batches);

// check_memory's first way to fit a step that does not: the fewest micro-batches above
// `request`'s, of counts a quarter apart and the most the epoch's batches allow, with which a
// step of `request` re-planned fits (step_fits), or nothing: none fits, or the count is not the
// run's to change (a --schedule-file's lists fix it, a --resume's checkpoint keeps it). Also
// what the imbalance warning's command on fewer devices is given where its step would not fit.
std::optional<int> microbatches_that_fit(const Options& options, const model::ModelSpec& spec,
                                         const pipeline::PlanRequest& request,
                                         const EpochBatches& batches);

// "memory of a step, estimated: cpu:0 16.2 MiB, cpu:1 7.1 MiB" (each device's activations,
// parameters with their gradients and optimizer state, and staged batches), and where zb-auto
// was bounded to fit, "; zb-auto planned within it: at most 1,2 micro-batches in flight per
// device (as --max-activations 1,2)".
std::string describe_step(const FittedStep& step);

}  // namespace brigade::train

// CostModel: what each action costs, the input of the simulator (pipeline/schedule/simulator.h).
//
// Costs are in any one time unit (the command line uses abstract units; the runtime passes
// measured milliseconds). Per stage: F, B, W durations of one cost-model micro-batch and the
// activation bytes that micro-batch leaves on its device from F until its W (or BW) ends.
// BW costs B + W unless `bw` says otherwise: a runtime that fuses the two halves may run them
// cheaper together than apart (one walk over the layers, the activations still in cache), and
// a cost-aware schedule (generators/zb_auto.cpp) needs to know when splitting costs time. An action of a schedule whose micro-batch carries k cost-model micro-batches
// (Schedule::batch_units, a schedule file's `batch_units:`) costs k times as much and holds k
// times the bytes. `comm` is the latency of handing an activation or gradient to another device; links
// are not modelled as busy (two transfers may overlap).
//
// `measured`, when it holds an action, overrides the per-stage cost of that action: the
// runtime fills it with the durations it measured and replays them here.
//
// median_stage_costs() goes the other way: from measured steps to one cost per stage, the input
// a generator that plans for the costs (zb_auto) needs before the schedule exists.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "pipeline/schedule/action.h"
#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

struct StageCost {
  double f = 1, b = 1, w = 1;
  double activation_bytes = 1;
  std::optional<double> bw = std::nullopt;  // the fused backward; unset: b + w

  double fused() const { return bw.value_or(b + w); }
};

struct CostModel {
  std::vector<StageCost> stages;  // one per stage; empty: every stage costs `uniform`
  StageCost uniform;
  double comm = 0;
  std::map<Action, double> measured;

  const StageCost& stage(int s) const {
    return stages.empty() ? uniform : stages.at(static_cast<size_t>(s));
  }
};

// Per-stage medians over measured timelines (compute lane; other lanes are transfers): F from
// every timeline, B and W from those that split the backward, `bw` from those that fuse it
// (unset if none did); comm is the median transfer. Medians, not means: on a shared machine
// an action that lost its core for a while would drag a mean. A cost no timeline measured
// stays 0; activation bytes are not measured here (0).
CostModel median_stage_costs(const std::vector<const Timeline*>& measured, int stages);

}  // namespace brigade::pipeline

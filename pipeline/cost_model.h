// CostModel: what each action costs, the input of the simulator (pipeline/simulator.h).
//
// Costs are in any one time unit (the command line uses abstract units; the runtime passes
// measured milliseconds). Per stage: F, B, W durations of one cost-model micro-batch and the
// activation bytes that micro-batch leaves on its device from F until its W (or BW) ends.
// BW costs B + W. An action of a schedule whose micro-batch carries k cost-model micro-batches
// (Schedule::batch_units, the naive schedule) costs k times as much and holds k times the
// bytes. `comm` is the latency of handing an activation or gradient to another device; links
// are not modelled as busy (two transfers may overlap).
//
// `measured`, when it holds an action, overrides the per-stage cost of that action: the
// runtime fills it with the durations it measured and replays them here.
#pragma once

#include <map>
#include <vector>

#include "pipeline/action.h"

namespace brigade::pipeline {

struct StageCost {
  double f = 1, b = 1, w = 1;
  double activation_bytes = 1;
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

}  // namespace brigade::pipeline

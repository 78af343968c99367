// makespan_lower_bound(): no order of a schedule's actions can end sooner than this — the
// yardstick a generator's makespan is held against ("how far from the best possible?").
//
// The actions are the schedule's own (its placement, its split B + W or fused BW backwards),
// their costs and the simulator's rules (simulator.h: an action waits for its device and its
// inputs, plus `comm` across devices). Only the ORDER within each device's list is free, and
// each device may hold at most `memory[d]` (stage, micro-batch) pairs from the start of a
// forward to the end of its weight gradient (default: as many as the schedule itself holds,
// peak_live in validate.h). Three arguments, each a true bound; the largest is reported:
//
//   path    the longest chain of one micro-batch's actions: forward down every stage, the
//           backward back up, with the transfers between devices.
//   device  each device alone, every other device infinitely fast: an action cannot start
//           before the longest chain INTO it (its head) and the step cannot end sooner than
//           the longest chain OUT of it (its tail) after it ends. With one device and heads
//           and tails the best order, even when an action may be interrupted, is found
//           exactly (Jackson's rule: always run the ready action with the longest tail), and
//           an uninterrupted order cannot do better. This is 3m + p − 1 for ZB-H1's actions
//           with unit costs, (m + p − 1)·3 for 1F1B's.
//   memory  a stage whose device holds at most M pairs: the (j + M)-th forward of that stage
//           starts only after j of its pairs ended, and a pair takes at least its round trip
//           (its forward, the chain to the last stage and back, its own backward): the naive
//           schedule's bound, m round trips one after another.
//
// For unit costs the generators' gaps to it are in docs/schedules.md and held by
// tests/pipeline/schedule/lower_bound_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct MakespanBound {
  double makespan = 0;  // no order of the actions within the memory ends sooner
  std::string why;      // the argument that gives it: "device 3: ...", "path: ...", "memory: ..."
};

// `memory`: pairs per device; empty = the schedule's own peak in list order. The schedule must
// be valid (validate.h); throws std::invalid_argument when the costs do not fit it or a bound
// is below 1.
MakespanBound makespan_lower_bound(const Schedule& s, const CostModel& costs,
                                   const std::vector<int>& memory = {});

}  // namespace brigade::pipeline

// validate(): prove, before anything runs, that a schedule is complete and cannot hang.
//
// Compute-only lists (schedule.h). Checks, in order (the first failure is reported):
//   1. shape: p, v, m >= 1 and one list per device;
//   2. every action's stage and micro-batch are in range and the stage lives on the device
//      whose list holds it (the schedule's placement, schedule.h);
//   3. every (stage, micro-batch) has exactly one F, and exactly one B and one W, or exactly
//      one BW;
//   4. on its device, a (stage, micro-batch)'s F comes before its B (or BW), and B before W;
//   5. a dry run (pipeline/schedule/dry_run.h) finishes: every F waits for the previous stage's F,
//      every B for the next stage's B, and no device waits forever.
//
// Lowered lists (lowering.h): 1 to 4 for the compute instructions, then
//   6. every transfer joins its stage to a neighbour on another device, appears once, and
//      has its partner: 1RF3 the send 0SF3, 0SF3 the receive 1RF3 (the "unmatched partner");
//   7. what a compute takes from another device is received before it on its device (1RF3
//      before 1F3), and what it makes for another device is sent after it (0SF3 after 0F3);
//   8. the happens-before graph (happens_before.h) has no cycle — a proof over the lists,
//      not a timeout; a cycle is named wait after wait;
//   9. with a bound, no device holds more live activations than it allows: a (stage,
//      micro-batch) is live on its device from its F to its W or BW, in list order.
//
// A failure throws ScheduleError whose message names the schedule and the problem, then
// prints the grid (or the lists, when actions are out of range) with the offending action
// marked [like1B3]; `at()` says which cell that is.
#pragma once

#include <optional>
#include <stdexcept>
#include <vector>

#include "pipeline/schedule/grid.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ScheduleError(const std::string& what, std::optional<Cell> at)
      : std::runtime_error(what), at_(at) {}
  const std::optional<Cell>& at() const { return at_; }

 private:
  std::optional<Cell> at_;
};

void validate(const Schedule& s);
void validate(const LoweredSchedule& s, std::optional<int> max_live = std::nullopt);

// The most (stage, micro-batch) pairs each device holds between an F and its W or BW, in
// list order. Stages and micro-batches must be in range.
std::vector<int> peak_live(const LoweredSchedule& s);

}  // namespace brigade::pipeline

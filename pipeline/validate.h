// validate(): prove, before anything runs, that a schedule is complete and cannot hang.
//
// Checks, in order (the first failure is reported):
//   1. shape: p, v, m >= 1 and one list per device;
//   2. every action's stage and micro-batch are in range and the stage lives on the device
//      whose list holds it (placement: stage s on device s mod p);
//   3. every (stage, micro-batch) has exactly one F, and exactly one B and one W, or exactly
//      one BW;
//   4. on its device, a (stage, micro-batch)'s F comes before its B (or BW), and B before W;
//   5. a dry run (pipeline/dry_run.h) finishes: every F waits for the previous stage's F,
//      every B for the next stage's B, and no device waits forever.
// A failure throws ScheduleError whose message names the schedule and the problem, then
// prints the grid (or the lists, when actions are out of range) with the offending action
// marked [like1B3].
#pragma once

#include <stdexcept>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void validate(const Schedule& s);

}  // namespace brigade::pipeline

// Dry run: execute a schedule on a clock where every action takes one tick, the way
// torchgpipe's clock_cycles pictures GPipe. At each tick every device runs the head of its
// list if everything that action needs (pipeline/schedule/action.h: needs) finished at an earlier
// tick. It proves that the lists make progress — or says exactly where they stop:
// "device 2 waits at 2B3 for 3B3". It cannot loop: each tick runs at least one action or
// the run ends.
//
// Requires actions whose stage and micro-batch are in range (validate() checks that first).
#pragma once

#include <vector>

#include "pipeline/schedule/action.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct Stall {
  int device;       // the device that cannot go on
  int index;        // position of its blocked action in its list
  Need waiting_for; // the first unmet need of that action
};

struct DryRun {
  std::vector<std::vector<int>> tick;  // tick[d][i]: when lists[d][i] ran; -1 = never
  int ticks = 0;                       // ticks used
  std::vector<Stall> stalls;           // empty when every action ran
  bool finished() const { return stalls.empty(); }
};

DryRun dry_run(const Schedule& s);

// "device 2 waits at 2B3 for 3B3; device 3 waits at 3F4 for 2F4"
std::string describe_stalls(const Schedule& s, const DryRun& run);

}  // namespace brigade::pipeline

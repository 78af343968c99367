// simulate(): run a schedule on a model of the machine, not on the machine.
//
// Each device executes its list in order, one action at a time. An action starts when its
// device is free and everything it needs (pipeline/schedule/action.h: needs) has finished — plus
// CostModel::comm when the needed result was produced on another device. Its duration comes
// from the CostModel. These two rules fix every start time, whatever order they are worked
// out in, so the simulator sweeps the devices, starting every head action whose inputs are
// known, until all actions have run — or until a sweep starts nothing, which it reports as
// "not progressing: device 2 waits at 2B3 for 3B3" instead of looping.
//
// Lowered lists (lowering.h) run on three lanes per device, each in list order:
//   compute  starts when the lane is free, its same-device inputs have finished and its
//            receives have arrived;
//   send     starts when the lane is free and the tensor is made, and takes CostModel::comm:
//            the cost is paid here, and sends queue behind each other;
//   recv     starts when the lane is free and its send has started, and ends when the
//            tensor has arrived (the send's end) — or at once, if that is already past.
// On the lists lower() makes, every compute action starts when it starts in the compute-only
// simulation of the same schedule, unless sends queue on a send lane (never with comm = 0).
// Each send and its receive are joined by a Timeline flow.
#pragma once

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

struct Simulation {
  Timeline timeline;
  TimelineStats stats;
};

// Throws ScheduleError (pipeline/schedule/validate.h) when the lists do not make progress, and
// std::invalid_argument when the cost model does not fit the schedule.
Simulation simulate(const Schedule& s, const CostModel& costs);
Simulation simulate(const LoweredSchedule& s, const CostModel& costs);

// The duration the simulator gives one action of s.
double action_cost(const Schedule& s, const CostModel& costs, const Action& a);

}  // namespace brigade::pipeline

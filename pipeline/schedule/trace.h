// Trace: a measured timeline (Runtime::step's) next to the simulator's prediction for the
// same costs. The measured durations of every action become CostModel::measured, the mean
// duration of a send becomes the transfer latency `comm`, and simulate() replays the lists:
// what remains between the two makespans is what the model leaves out (host threads
// describing work late, the CPU streams of one device sharing its threads, copies).
#pragma once
#include <string>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

// Every compute-lane event's duration, by action; comm = mean send-lane duration (0 if none).
CostModel measured_costs(const Schedule& s, const Timeline& measured);

struct TraceComparison {
  TimelineStats measured;
  Simulation simulated;  // of s with measured_costs(s, measured)
};
TraceComparison compare_with_simulation(const Schedule& s, const Timeline& measured);

// "makespan 12.3 ms measured, 11.0 simulated (+11.8 %); bubble 20.1 % measured, 18.0 % simulated"
std::string format_comparison(const TraceComparison& c);

}  // namespace brigade::pipeline

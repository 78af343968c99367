#include "pipeline/simulator.h"

#include <algorithm>
#include <stdexcept>

#include "pipeline/phase_table.h"
#include "pipeline/validate.h"

namespace brigade::pipeline {

double action_cost(const Schedule& s, const CostModel& costs, const Action& a) {
  if (auto it = costs.measured.find(a); it != costs.measured.end()) return it->second;
  const StageCost& c = costs.stage(a.stage);
  double one = 0;
  switch (a.op) {
    case Op::F: one = c.f; break;
    case Op::B: one = c.b; break;
    case Op::W: one = c.w; break;
    case Op::BW: one = c.fused(); break;
  }
  return one * s.batch_units;
}

Simulation simulate(const Schedule& s, const CostModel& costs) {
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != s.stages())
    throw std::invalid_argument("simulate '" + s.name + "': the cost model has " +
                                std::to_string(costs.stages.size()) + " stage costs for " +
                                std::to_string(s.stages()) + " stages");
  for (int d = 0; d < s.devices; ++d)
    for (const Action& a : s.lists[d])
      if (a.stage < 0 || a.stage >= s.stages() || a.microbatch < 0 ||
          a.microbatch >= s.microbatches)
        throw std::invalid_argument("simulate '" + s.name + "': action " + to_string(a) +
                                    " is out of range; validate() the schedule first");

  Simulation sim;
  Timeline& t = sim.timeline;
  t.title = s.name;
  t.devices = s.devices;
  t.chunks = s.chunks;

  PhaseTable<double> done_at(s.stages(), s.microbatches, -1);  // -1: not finished yet
  std::vector<double> free_at(s.devices, 0);
  std::vector<size_t> next(s.devices, 0);
  size_t remaining = s.total_actions();

  while (remaining > 0) {
    bool progressed = false;
    for (int d = 0; d < s.devices; ++d) {
      while (next[d] < s.lists[d].size()) {
        const Action& a = s.lists[d][next[d]];
        double start = free_at[d];
        bool ready = true;
        for (const Need& n : needs(a, s.stages())) {
          if (done_at[n] < 0) { ready = false; break; }
          const double hop = s.device_of(n.stage) == d ? 0 : costs.comm;
          start = std::max(start, done_at[n] + hop);
        }
        if (!ready) break;
        const double end = start + action_cost(s, costs, a);
        for (Phase ph : completes(a.op)) done_at[{a.stage, ph, a.microbatch}] = end;
        t.events.push_back({d, 0, a, start, end});
        free_at[d] = end;
        ++next[d];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string why;
      for (int d = 0; d < s.devices; ++d) {
        if (next[d] == s.lists[d].size()) continue;
        const Action& a = s.lists[d][next[d]];
        for (const Need& n : needs(a, s.stages()))
          if (done_at[n] < 0) {
            why += (why.empty() ? "" : "; ") + std::string("device ") + std::to_string(d) +
                   " waits at " + to_string(a) + " for " + to_string(n);
            break;
          }
      }
      throw ScheduleError("simulate '" + s.name + "': not progressing: " + why);
    }
  }

  std::vector<double> bytes(s.stages());
  for (int st = 0; st < s.stages(); ++st)
    bytes[st] = costs.stage(st).activation_bytes * s.batch_units;
  sim.stats = measure(t, bytes);
  return sim;
}

}  // namespace brigade::pipeline

#include "pipeline/schedule/dry_run.h"

#include <stdexcept>

#include "pipeline/schedule/need_table.h"

namespace brigade::pipeline {

DryRun dry_run(const Schedule& s) {
  for (int d = 0; d < s.devices; ++d)
    for (const Action& a : s.lists[d])
      if (a.stage < 0 || a.stage >= s.stages() || a.microbatch < 0 ||
          a.microbatch >= s.microbatches)
        throw std::invalid_argument("dry_run: action " + to_string(a) + " on device " +
                                    std::to_string(d) + " is out of range; validate() first");

  DryRun run;
  run.tick.resize(s.devices);
  for (int d = 0; d < s.devices; ++d) run.tick[d].assign(s.lists[d].size(), -1);

  NeedTable<int> done_at(s.stages(), s.microbatches, -1);  // tick a phase finished, -1: not yet
  std::vector<size_t> next(s.devices, 0);                    // head of each device's list
  size_t remaining = s.total_actions();

  for (int t = 0; remaining > 0; ++t) {
    // Decide every device's move from the state at the start of tick t, then apply them:
    // an action finishing at tick t is visible at tick t+1, as on a real pipeline.
    std::vector<int> runs;
    for (int d = 0; d < s.devices; ++d) {
      if (next[d] == s.lists[d].size()) continue;
      bool ready = true;
      for (const Need& n : needs(s.lists[d][next[d]], s.stages()))
        if (done_at[n] < 0) ready = false;
      if (ready) runs.push_back(d);
    }
    if (runs.empty()) {  // nobody can move: report every blocked head
      for (int d = 0; d < s.devices; ++d) {
        if (next[d] == s.lists[d].size()) continue;
        const Action& a = s.lists[d][next[d]];
        for (const Need& n : needs(a, s.stages()))
          if (done_at[n] < 0) {
            run.stalls.push_back({d, static_cast<int>(next[d]), n});
            break;
          }
      }
      return run;
    }
    for (int d : runs) {
      const Action& a = s.lists[d][next[d]];
      for (Phase ph : completes(a.op)) done_at[{a.stage, ph, a.microbatch}] = t;
      run.tick[d][next[d]] = t;
      ++next[d];
      --remaining;
    }
    run.ticks = t + 1;
  }
  return run;
}

std::string describe_stalls(const Schedule& s, const DryRun& run) {
  std::string out;
  for (const Stall& st : run.stalls) {
    if (!out.empty()) out += "; ";
    out += "device " + std::to_string(st.device) + " waits at " +
           to_string(s.lists[st.device][st.index]) + " for " + to_string(st.waiting_for);
  }
  return out;
}

}  // namespace brigade::pipeline

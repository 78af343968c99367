#include "pipeline/schedule/trace.h"

#include <cstdio>

namespace brigade::pipeline {

CostModel measured_costs(const Schedule& s, const Timeline& measured) {
  CostModel costs;
  costs.uniform = {0, 0, 0, 0};
  double send_total = 0;
  int sends = 0;
  for (const TimelineEvent& e : measured.events) {
    if (e.lane == 0) costs.measured[e.action] = e.end - e.start;
    else {
      send_total += e.end - e.start;
      ++sends;
    }
  }
  costs.comm = sends > 0 ? send_total / sends : 0.0;
  (void)s;
  return costs;
}

TraceComparison compare_with_simulation(const Schedule& s, const Timeline& measured) {
  TraceComparison c;
  c.measured = measure(measured);
  c.simulated = simulate(s, measured_costs(s, measured));
  return c;
}

std::string format_comparison(const TraceComparison& c) {
  const double m = c.measured.makespan, sim = c.simulated.stats.makespan;
  char line[256];
  std::snprintf(line, sizeof line,
                "makespan %.2f measured, %.2f simulated (%+.1f %%); bubble %.1f %% measured, "
                "%.1f %% simulated",
                m, sim, sim > 0 ? 100 * (m - sim) / sim : 0.0, 100 * c.measured.bubble_fraction,
                100 * c.simulated.stats.bubble_fraction);
  return line;
}

}  // namespace brigade::pipeline

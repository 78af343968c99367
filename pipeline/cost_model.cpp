#include "pipeline/cost_model.h"

#include <stdexcept>
#include <string>

namespace brigade::pipeline {

CostModel mean_stage_costs(const std::vector<const Timeline*>& measured, int stages) {
  struct Mean {
    double sum = 0;
    int n = 0;
    void add(double x) { sum += x, ++n; }
    double get() const { return n > 0 ? sum / n : 0.0; }
  };
  // [stage][op]: F, B, W, BW in Op's order.
  std::vector<std::vector<Mean>> per(static_cast<size_t>(stages), std::vector<Mean>(4));
  Mean comm;
  for (const Timeline* t : measured)
    for (const TimelineEvent& e : t->events) {
      if (e.lane != 0) {
        comm.add(e.end - e.start);
        continue;
      }
      if (e.action.stage < 0 || e.action.stage >= stages)
        throw std::invalid_argument("mean_stage_costs: " + to_string(e.action) +
                                    " is outside the " + std::to_string(stages) + " stages");
      per[static_cast<size_t>(e.action.stage)][static_cast<size_t>(e.action.op)].add(e.end -
                                                                                      e.start);
    }
  CostModel costs;
  costs.comm = comm.get();
  for (const std::vector<Mean>& m : per) {
    StageCost c{m[0].get(), m[1].get(), m[2].get(), 0};
    if (m[3].n > 0) c.bw = m[3].get();
    costs.stages.push_back(c);
  }
  return costs;
}

}  // namespace brigade::pipeline

#include "pipeline/schedule/cost_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brigade::pipeline {

namespace {

// 0 for none; the mean of the middle two for an even count.
double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  const size_t half = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(half), xs.end());
  const double upper = xs[half];
  if (xs.size() % 2 == 1) return upper;
  return (upper + *std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(half))) / 2;
}

}  // namespace

CostModel median_stage_costs(const std::vector<const Timeline*>& measured, int stages) {
  // durations[stage][op], ops in Op's order: F, B, W, BW.
  std::vector<std::vector<std::vector<double>>> durations(
      static_cast<size_t>(stages), std::vector<std::vector<double>>(4));
  std::vector<double> transfers;
  for (const Timeline* t : measured)
    for (const TimelineEvent& e : t->events) {
      if (e.lane != 0) {
        transfers.push_back(e.end - e.start);
        continue;
      }
      if (e.action.stage < 0 || e.action.stage >= stages)
        throw std::invalid_argument("median_stage_costs: " + to_string(e.action) +
                                    " is outside the " + std::to_string(stages) + " stages");
      durations[static_cast<size_t>(e.action.stage)][static_cast<size_t>(e.action.op)].push_back(
          e.end - e.start);
    }
  CostModel costs;
  costs.comm = median(transfers);
  for (const auto& d : durations) {
    StageCost c{median(d[0]), median(d[1]), median(d[2]), 0};
    if (!d[3].empty()) c.bw = median(d[3]);
    costs.stages.push_back(c);
  }
  return costs;
}

}  // namespace brigade::pipeline

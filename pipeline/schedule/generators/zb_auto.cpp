// zb-auto: a zero-bubble schedule cut to the measured costs (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 3, the heuristic half of its automatic scheduling; not the
// ILP). ZB-H1 decides where each W goes from the device's index alone, which is right when
// F = B = W on every stage. On uneven stages the W's should go where a device would otherwise
// wait, and a backward should stay fused (BW) wherever splitting it buys nothing: on a CPU two
// half passes cost more than one whole (CostModel's `bw`).
//
// It is the list scheduler (list_scheduler.h) with the costs it is given, one stage per device
// and a budget of `max_in_flight` micro-batches per device (default p, the peak of ZB-H1 and of
// 1F1B's first device), or a budget of its own for each device (devices of different memory:
// brigade-train --max-activations 2,1). Like the paper, which runs its heuristic under several
// settings and keeps the best, it tries the scheduler's 16 policies plus 1f1b, zb-h1 and the
// authors' own heuristic's eight orders within the budget (zero_bubble_heuristic.h),
// simulates each with the costs and keeps the shortest makespan. So for its costs zb-auto is
// never slower than 1f1b, zb-h1 or the authors' automatic schedule at its memory, and stays
// within its budget.
//
//   p = 2, m = 3; stage 0: F = B = W = 1, BW = 1.5; stage 1: half of that. Device 0, the
//   bottleneck, keeps its backwards fused and fills its pipeline first; device 1 splits, so
//   that its input gradients reach device 0 sooner: device 0 never waits (makespan 7.5, its
//   own work; 1F1B 7.75, ZB-H1 9).
//   d0: 0F0 0F1 0BW0 0F2 0BW1 0BW2
//   d1: 1F0 1B0 1F1 1B1 1W0 1W1 1F2 1BW2
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"
#include "pipeline/schedule/generators/zero_bubble_heuristic.h"

namespace brigade::pipeline {

Schedule zb_auto(int devices, int microbatches, const CostModel& costs, int max_in_flight) {
  if (max_in_flight < 0)
    throw std::invalid_argument("zb-auto: max in-flight micro-batches must be at least 1, got " +
                                std::to_string(max_in_flight));
  return zb_auto(devices, microbatches, costs,
                 std::vector<int>(static_cast<size_t>(std::max(devices, 0)),
                                  max_in_flight == 0 ? devices : max_in_flight));
}

Schedule zb_auto(int devices, int microbatches, const CostModel& costs,
                 const std::vector<int>& max_in_flight) {
  detail::empty_schedule("zb-auto", devices, microbatches, 1);  // checks p, m >= 1
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != devices)
    throw std::invalid_argument("zb-auto: the cost model has " +
                                std::to_string(costs.stages.size()) + " stage costs for " +
                                std::to_string(devices) + " devices (one stage per device)");
  if (static_cast<int>(max_in_flight.size()) != devices)
    throw std::invalid_argument("zb-auto: " + std::to_string(max_in_flight.size()) +
                                " in-flight bounds for " + std::to_string(devices) + " devices");
  for (size_t d = 0; d < max_in_flight.size(); ++d)
    if (max_in_flight[d] < 1)
      throw std::invalid_argument("zb-auto: max in-flight micro-batches must be at least 1, got " +
                                  std::to_string(max_in_flight[d]) + " on device " +
                                  std::to_string(d));
  std::vector<Schedule> hand_made = {one_f_one_b(devices, microbatches),
                                     zb_h1(devices, microbatches)};
  for (Schedule& s : zero_bubble_heuristic_orders(devices, microbatches, costs, max_in_flight))
    hand_made.push_back(std::move(s));
  return shortest_list_schedule(
      {.name = "zb-auto", .devices = devices, .microbatches = microbatches, .chunks = 1,
       .placement = Placement::looped, .budget = devices, .costs = costs,
       .device_budgets = max_in_flight},
      std::move(hand_made));
}

}  // namespace brigade::pipeline

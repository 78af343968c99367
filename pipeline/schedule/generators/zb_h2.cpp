// zb-h2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, schedule ZB-H2): ZB-H1
// with a deeper warm-up. Where ZB-H1 keeps 1F1B's memory (p micro-batches on a device), ZB-H2
// allows 2p - 1, so that the first devices run extra forwards while they would wait for their
// first input gradient, and W's fill what is left: with F = B = W no device idles between its
// first action and its last.
//
// It is the list scheduler (list_scheduler.h) with a budget of 2p - 1 micro-batches per device
// and equal costs, against zb-h1 itself (the shorter wins). The paper counts a device's bubble
// from its own first action to its own last, because its iterations overlap (the optimizer
// step is validated after the fact, so device 0 starts the next step while the last device
// ends this one). Brigade's step ends when every device has ended; the last device still starts
// p - 1 forwards late, so the makespan here is ZB-H1's, 3m + p - 1 — docs/schedules.md shows
// both measures.
//
// The authors' ZB-H2 is their automatic scheduler at 2p micro-batches (zero_bubble_heuristic.h).
// At F = B = W and no comm it is no shorter than this order at 2p - 1. With a transfer cost its
// extra micro-batch buys time (f = 1, b = 2, w = 1, comm = 0.1: 71.7 against 72.4 at p = 8,
// m = 16), so where its order is shorter for the costs, zb-h2 is that order and holds 2p.
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"
#include "pipeline/schedule/generators/zero_bubble_heuristic.h"

namespace brigade::pipeline {

Schedule zb_h2(int devices, int microbatches, const CostModel& costs) {
  detail::empty_schedule("zb-h2", devices, microbatches, 1);  // checks p, m >= 1
  return own_or_heuristic(
      shortest_list_schedule({.name = "zb-h2", .devices = devices, .microbatches = microbatches,
                              .chunks = 1, .placement = Placement::looped,
                              .budget = 2 * devices - 1, .costs = costs},
                             {zb_h1(devices, microbatches, costs)}),
      costs, std::vector<int>(static_cast<size_t>(devices), 2 * devices));
}

}  // namespace brigade::pipeline

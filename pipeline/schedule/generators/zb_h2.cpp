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
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"

namespace brigade::pipeline {

Schedule zb_h2(int devices, int microbatches) {
  detail::empty_schedule("zb-h2", devices, microbatches, 1);  // checks p, m >= 1
  return shortest_list_schedule({.name = "zb-h2", .devices = devices, .microbatches = microbatches,
                                 .chunks = 1, .placement = Placement::looped,
                                 .budget = 2 * devices - 1, .costs = {}},
                                {zb_h1(devices, microbatches)});
}

}  // namespace brigade::pipeline

// zb-h1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, schedule ZB-H1): 1F1B
// with the backward split in two. B (input gradient) stays where 1F1B puts its backward,
// because the previous stage waits for it; W (weight gradient) waits for nobody, so device d
// postpones its first d W's and runs them at the very end, where 1F1B's cool-down has its
// bubbles. Every other W follows its B's successor:
//
//   p = 2, m = 3:
//   d0: 0F0 0F1 0B0 0W0 0F2 0B1 0W1 0B2 0W2
//   d1: 1F0 1B0 1F1 1B1 1W0 1F2 1B2 1W1 1W2
//
// With F = B = W the idle time per device drops from 1F1B's (p-1)(F+B+W) to (p-1)(F+B-W).
// Device d then holds at most p micro-batches' activations (from F until W), the peak
// 1F1B has on device 0. m < p works, as for 1F1B.
//
// The authors' own ZB-H1 is their automatic scheduler at p micro-batches
// (zero_bubble_heuristic.h); it plans for the costs. At F = B = W and no comm it gives this
// order, but with a transfer cost it moves W's into the waits: at f = 1, b = 2, w = 1 and
// comm = 0.1, 22.6 against this order's 23 at p = 4, m = 4. So for costs that make it shorter,
// zb-h1 is the heuristic's order, within the same p micro-batches.
#include <algorithm>
#include <utility>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/zero_bubble_heuristic.h"

namespace brigade::pipeline {

namespace {

// The order the paper draws.
Schedule zb_h1_pattern(int devices, int microbatches) {
  Schedule s = detail::empty_schedule("zb-h1", devices, microbatches, 1);
  for (int d = 0; d < devices; ++d) {
    auto& list = s.lists[d];
    const int warmup = std::min(devices - 1 - d, microbatches);
    int next_f = 0, next_b = 0, next_w = 0;
    auto backward = [&]() {  // a B, then a W unless this device still postpones W's
      list.push_back({d, Op::B, next_b});
      if (next_b >= d) list.push_back({d, Op::W, next_w++});
      ++next_b;
    };
    while (next_f < warmup) list.push_back({d, Op::F, next_f++});
    while (next_f < microbatches) {
      list.push_back({d, Op::F, next_f++});
      backward();
    }
    while (next_b < microbatches) backward();
    while (next_w < microbatches) list.push_back({d, Op::W, next_w++});
  }
  return s;
}

}  // namespace

Schedule zb_h1(int devices, int microbatches, const CostModel& costs) {
  Schedule pattern = zb_h1_pattern(devices, microbatches);  // checks p, m >= 1 first
  return own_or_heuristic(std::move(pattern), costs,
                          std::vector<int>(static_cast<size_t>(devices), devices));
}

}  // namespace brigade::pipeline

// 1f1b (PipeDream-Flush): device d first runs p-1-d forwards (warm-up), then alternates one
// forward and one backward (steady state), then runs the backwards left (cool-down). Same
// bubble as GPipe, but device d never holds more than p-d micro-batches' activations.
// m < p works: the warm-up is cut to m forwards.
//
//   p = 2, m = 3:
//   d0: 0F0 0F1 0BW0 0F2 0BW1 0BW2
//   d1: 1F0 1BW0 1F1 1BW1 1F2 1BW2
#include <algorithm>

#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule one_f_one_b(int devices, int microbatches) {
  Schedule s = detail::empty_schedule("1f1b", devices, microbatches, 1);
  for (int d = 0; d < devices; ++d) {
    auto& list = s.lists[d];
    const int warmup = std::min(devices - 1 - d, microbatches);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) list.push_back({d, Op::F, next_f++});
    while (next_f < microbatches) {
      list.push_back({d, Op::F, next_f++});
      list.push_back({d, Op::BW, next_b++});
    }
    while (next_b < microbatches) list.push_back({d, Op::BW, next_b++});
  }
  return s;
}

}  // namespace brigade::pipeline

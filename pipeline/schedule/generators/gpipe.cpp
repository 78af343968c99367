// gpipe: every device runs the forward of all m micro-batches, then their backward, last
// micro-batch first (the order of the GPipe paper's figure; it frees activations LIFO).
// Works for any p and m; it holds all m micro-batches' activations at once on every device.
//
//   p = 2, m = 3:
//   d0: 0F0 0F1 0F2 0BW2 0BW1 0BW0
//   d1: 1F0 1F1 1F2 1BW2 1BW1 1BW0
#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule gpipe(int devices, int microbatches) {
  Schedule s = detail::empty_schedule("gpipe", devices, microbatches, 1);
  for (int d = 0; d < devices; ++d) {
    for (int mb = 0; mb < microbatches; ++mb) s.lists[d].push_back({d, Op::F, mb});
    for (int mb = microbatches - 1; mb >= 0; --mb) s.lists[d].push_back({d, Op::BW, mb});
  }
  return s;
}

}  // namespace brigade::pipeline

// gpipe: every device runs the forward of all m micro-batches, then their backward in the
// same order, micro-batch 0 first — as PyTorch's ScheduleGPipe runs them. Each stage then
// adds its weight gradients in the order one device does, so the training is bit for bit one
// device's (tests/pipeline/runtime/parity_test.cpp). The GPipe paper's figure runs the backward last
// micro-batch first (freeing activations LIFO); the makespan is the same either way, and so
// is the peak: every device holds all m micro-batches' activations when its backward starts.
// Works for any p and m.
//
//   p = 2, m = 3:
//   d0: 0F0 0F1 0F2 0BW0 0BW1 0BW2
//   d1: 1F0 1F1 1F2 1BW0 1BW1 1BW2
#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule gpipe(int devices, int microbatches) {
  Schedule s = detail::empty_schedule("gpipe", devices, microbatches, 1);
  for (int d = 0; d < devices; ++d) {
    for (int mb = 0; mb < microbatches; ++mb) s.lists[d].push_back({d, Op::F, mb});
    for (int mb = 0; mb < microbatches; ++mb) s.lists[d].push_back({d, Op::BW, mb});
  }
  return s;
}

}  // namespace brigade::pipeline

// looped-bfs (Lamy-Poirier, 2023, "Breadth-First Pipeline Parallelism"; PyTorch's
// ScheduleLoopedBFS): v chunks per device as in interleaved-1f1b (stage c·p + d is chunk c of
// device d), but breadth first: a device runs the forward of EVERY micro-batch on its chunk 0,
// then every one on chunk 1, ..., then the backwards with the chunks reversed. Each chunk is
// a GPipe of its own, so a device holds all m micro-batches of all v chunks at its peak —
// GPipe's memory — and the loop over chunks shortens the fill and drain: with unit costs the
// bubble is (p-1)/(v·m + p-1), interleaved-1f1b's, for any m (no multiple of p needed).
//
// The backwards of a chunk run in micro-batch order 0, 1, ... (PyTorch runs them in reverse),
// so every stage adds its weight gradients in the order one device does: bit for bit the
// same training (tests/pipeline/runtime/parity_test.cpp).
//
//   p = 2, m = 2, v = 2 (stages 0, 2 on d0; 1, 3 on d1):
//   d0: 0F0 0F1 2F0 2F1 2BW0 2BW1 0BW0 0BW1
//   d1: 1F0 1F1 3F0 3F1 3BW0 3BW1 1BW0 1BW1
#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule looped_bfs(int devices, int microbatches, int chunks) {
  Schedule s = detail::empty_schedule("looped-bfs", devices, microbatches, chunks);
  for (int d = 0; d < devices; ++d) {
    for (int c = 0; c < chunks; ++c)
      for (int mb = 0; mb < microbatches; ++mb) s.lists[d].push_back({c * devices + d, Op::F, mb});
    for (int c = chunks - 1; c >= 0; --c)
      for (int mb = 0; mb < microbatches; ++mb) s.lists[d].push_back({c * devices + d, Op::BW, mb});
  }
  return s;
}

}  // namespace brigade::pipeline

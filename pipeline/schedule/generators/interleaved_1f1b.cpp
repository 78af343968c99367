// interleaved-1f1b (Narayanan et al., SC'21, "Efficient Large-Scale Language Model Training
// on GPU Clusters Using Megatron-LM"): each device holds v chunks, stage c·p + d being chunk
// c of device d. Micro-batches go round in groups of p: a device runs the forward of
// micro-batches 0..p-1 on its chunk 0, then the same p on chunk 1, ..., then the next group.
// Backwards go the same way with the chunks reversed. Warm-up is (p-1-d)·2 + (v-1)·p
// forwards (capped at m·v), then one forward one backward, then the backwards left. The
// bubble shrinks by v: (p-1)/(v·m + p-1) of the step with unit costs.
//
// The groups of p need m to be a multiple of p (Megatron asserts the same). Other m throw an
// error that names the nearest values that work; v = 1 is allowed and is a 1F1B with a
// deeper warm-up.
#include <algorithm>
#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule interleaved_1f1b(int devices, int microbatches, int chunks) {
  Schedule s = detail::empty_schedule("interleaved-1f1b", devices, microbatches, chunks);
  const int p = devices, m = microbatches, v = chunks;
  if (m % p != 0) {
    const int below = m / p * p, above = below + p;
    throw MicrobatchCountError(
        "interleaved-1f1b: micro-batches must be a multiple of the devices (p=" +
        std::to_string(p) + "), got m=" + std::to_string(m) + "; try m=" +
        (below > 0 ? std::to_string(below) + " or m=" : std::string()) + std::to_string(above));
  }
  // The k-th forward (or backward) of a device, k in [0, m·v): which chunk, which micro-batch.
  auto microbatch = [&](int k) { return k / (p * v) * p + k % p; };
  auto forward_chunk = [&](int k) { return k / p % v; };
  auto backward_chunk = [&](int k) { return v - 1 - k / p % v; };

  const int total = m * v;
  for (int d = 0; d < p; ++d) {
    auto& list = s.lists[d];
    const int warmup = std::min((p - 1 - d) * 2 + (v - 1) * p, total);
    int next_f = 0, next_b = 0;
    auto forward = [&]() {
      list.push_back({forward_chunk(next_f) * p + d, Op::F, microbatch(next_f)});
      ++next_f;
    };
    auto backward = [&]() {
      list.push_back({backward_chunk(next_b) * p + d, Op::BW, microbatch(next_b)});
      ++next_b;
    };
    while (next_f < warmup) forward();
    while (next_f < total) forward(), backward();
    while (next_b < total) backward();
  }
  return s;
}

}  // namespace brigade::pipeline

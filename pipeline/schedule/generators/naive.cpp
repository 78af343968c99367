// naive: the question's starting point. The model is split across devices, but nothing
// overlaps: each micro-batch goes forward through stage 0, 1, ..., S-1 and backward through
// S-1, ..., 0 before the next one starts, so exactly one device works at any instant.
//
// With m = 1 the mini-batch is not cut at all (the textbook baseline, brigade-train's default
// for naive); with m > 1 the micro-batches run one after another, their weight gradients
// accumulated in order: the same time as m = 1 (m pieces, each 1/m of the work), the memory
// of one micro-batch instead of the whole mini-batch.
//
//   p = 2, m = 2:
//   d0: 0F0 0BW0 0F1 0BW1
//   d1: 1F0 1BW0 1F1 1BW1
#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule naive(int devices, int microbatches, int chunks) {
  Schedule s = detail::empty_schedule("naive", devices, microbatches, chunks);
  for (int mb = 0; mb < microbatches; ++mb) {
    for (int st = 0; st < s.stages(); ++st) s.lists[s.device_of(st)].push_back({st, Op::F, mb});
    for (int st = s.stages() - 1; st >= 0; --st)
      s.lists[s.device_of(st)].push_back({st, Op::BW, mb});
  }
  return s;
}

}  // namespace brigade::pipeline

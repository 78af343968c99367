// naive: the question's starting point. The model is split across devices, but the
// mini-batch is not: it goes forward through stage 0, 1, ..., S-1 and backward through
// S-1, ..., 0 as one piece, so exactly one device works at any instant.
//
// m is not a split here: the schedule has ONE micro-batch that carries all m cost-model
// micro-batches (batch_units = m), so that its cost compares fairly with the schedules that
// cut the same mini-batch into m pieces.
#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

Schedule naive(int devices, int microbatches, int chunks) {
  Schedule s = detail::empty_schedule("naive", devices, microbatches, chunks);
  s.microbatches = 1;
  s.batch_units = microbatches;
  for (int st = 0; st < s.stages(); ++st) s.lists[s.device_of(st)].push_back({st, Op::F, 0});
  for (int st = s.stages() - 1; st >= 0; --st)
    s.lists[s.device_of(st)].push_back({st, Op::BW, 0});
  return s;
}

}  // namespace brigade::pipeline

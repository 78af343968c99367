// interleaved-zb: interleaved 1F1B's placement (v chunks per device, looped, schedule.h) with
// the backward split as the zero-bubble schedules split it — B where the device upstream waits
// for it, W wherever the device would otherwise idle (PyTorch's ScheduleInterleavedZeroBubble
// is the same idea). It is the list scheduler (list_scheduler.h) with equal costs and a budget
// of p micro-batches of a device's share per device (p·v chunk-micro-batches), 1F1B's peak, so
// it needs no more memory than 1F1B; unlike interleaved-1f1b it takes any m.
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"

namespace brigade::pipeline {

Schedule interleaved_zb(int devices, int microbatches, int chunks) {
  detail::empty_schedule("interleaved-zb", devices, microbatches, chunks);  // checks p, m, v
  return shortest_list_schedule({.name = "interleaved-zb", .devices = devices,
                                 .microbatches = microbatches, .chunks = chunks,
                                 .placement = Placement::looped,
                                 .budget = devices * chunks, .costs = {}});
}

}  // namespace brigade::pipeline

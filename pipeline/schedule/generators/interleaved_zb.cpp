// interleaved-zb: interleaved 1F1B's placement (v chunks per device, looped, schedule.h) with
// the backward split as the zero-bubble schedules split it — B where the device upstream waits
// for it, W wherever the device would otherwise idle. It is the list scheduler
// (list_scheduler.h) with equal costs and a budget of p micro-batches of a device's share per
// device (p·v chunk-micro-batches), 1F1B's peak, so it needs no more memory than 1F1B; unlike
// interleaved-1f1b it takes any m. It also tries PyTorch's ScheduleInterleavedZeroBubble (the
// zero-bubble paper's ZB1P on interleaved stages, below), and keeps the shorter (list_scheduler.h).
#include <map>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"

namespace brigade::pipeline {

namespace {

// PyTorch's interleaved zero bubble, where it is defined (m a multiple of its rounds,
// max(1, m / p) of them). Device d runs interleaved 1F1B's steps — per-round chunks of
// forwards, then one forward and one B per step, then the B's — with fewer warm-up forwards
// (one per hop from the last device, not two), and one W after each B once d B's have run, the
// oldest B's first, the rest at the end. Its B's keep their W's close, so a B that costs twice
// an F delays little: at f = 1, b = 2, w = 1 it is much shorter than the list scheduler's orders
// planned for F = B = W (35 against 41 at p = 4, m = 8, v = 2), and as short at F = B = W.
std::vector<Schedule> as_pytorch_writes_it(int p, int m, int v) {
  const int rounds = std::max(1, m / p);
  if (m % rounds != 0) return {};
  const int per_round = m / rounds;
  Schedule s = detail::empty_schedule("interleaved-zb", p, m, v);
  s.placement = Placement::looped;
  for (int d = 0; d < p; ++d) {
    std::vector<Action>& list = s.lists[static_cast<size_t>(d)];
    const int warm_up = std::min((v - 1) * per_round + (p - 1 - d), m * v);
    const auto forward_stage = [&](int step) { return (step / per_round) % v * p + d; };
    const auto backward_stage = [&](int step) {
      return (v - 1 - (step - warm_up) / per_round % v) * p + d;
    };
    std::map<int, int> next_f, next_b, next_w;  // [stage]: its next micro-batch
    std::vector<int> b_stages;                  // the stage of each B, in order
    size_t w_run = 0;
    const auto add = [&](int stage, Op op, std::map<int, int>& next) {
      list.push_back({stage, op, next[stage]++});
    };
    const auto oldest_w = [&] { add(b_stages[w_run++], Op::W, next_w); };
    for (int step = 0; step < m * v + warm_up; ++step) {
      if (step < m * v) add(forward_stage(step), Op::F, next_f);
      if (step < warm_up) continue;
      add(backward_stage(step), Op::B, next_b);
      b_stages.push_back(backward_stage(step));
      if (step - warm_up >= d) oldest_w();
    }
    while (w_run < b_stages.size()) oldest_w();
  }
  return {s};
}

}  // namespace

Schedule interleaved_zb(int devices, int microbatches, int chunks) {
  detail::empty_schedule("interleaved-zb", devices, microbatches, chunks);  // checks p, m, v
  return shortest_list_schedule({.name = "interleaved-zb", .devices = devices,
                                 .microbatches = microbatches, .chunks = chunks,
                                 .placement = Placement::looped,
                                 .budget = devices * chunks, .costs = {}},
                                as_pytorch_writes_it(devices, microbatches, chunks));
}

}  // namespace brigade::pipeline

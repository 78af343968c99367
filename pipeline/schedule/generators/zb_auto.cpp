// zb-auto: a zero-bubble schedule cut to the measured costs (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 3, the heuristic half of its automatic scheduling; not the
// ILP). ZB-H1 decides where each W goes from the device's index alone, which is right when
// F = B = W on every stage. On uneven stages the W's should go where a device would otherwise
// wait, and a backward should stay fused (BW) wherever splitting it buys nothing: on a CPU two
// half passes cost more than one whole (CostModel's `bw`).
//
// A list scheduler plays the step forward in time by the simulator's rules (an action starts
// when its device is free and its inputs exist, + comm across devices). A free device picks:
//   1. a ready B: its input gradient unblocks the previous stage (unless the policy fills the
//      pipeline first and an F is ready too);
//   2. a ready F, while the device holds fewer than `max_in_flight` micro-batches (F to W);
//   3. a pending W: to make room for the next F, or to fill the wait for the next input (with
//      `w_fits`: only if it ends before that input is known to arrive);
//   otherwise it waits for the next event.
// A B is fused into BW when no W is pending (so W's run in micro-batch order and weight
// gradients accumulate in the order 1F1B's do) and the policy says so: never, always, on the
// first stage only (nobody waits for its input gradient), or when the previous device is busy
// past the BW's end anyway.
//
// Like the paper, which runs its heuristic under several settings and keeps the best, this
// tries 16 policies, plus 1f1b and zb-h1 themselves, simulates each with the costs and keeps
// the shortest makespan (ties: the earlier candidate). So for the costs it is given zb-auto is
// never slower than 1f1b or zb-h1, and no device holds more than max_in_flight micro-batches
// (default p, the peak of ZB-H1 and of 1F1B's first device).
//
//   p = 2, m = 3; stage 0: F = B = W = 1, BW = 1.5; stage 1: half of that. Device 0, the
//   bottleneck, keeps its backwards fused and fills its pipeline first; device 1 splits, so
//   that its input gradients reach device 0 sooner: device 0 never waits (makespan 7.5, its
//   own work; 1F1B 7.75, ZB-H1 9).
//   d0: 0F0 0F1 0BW0 0F2 0BW1 0BW2
//   d1: 1F0 1B0 1F1 1B1 1W0 1W1 1F2 1B2 1W2
#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

enum class Fuse { never, first_stage, upstream_busy, always };

struct Policy {
  bool forward_first = false;  // an F and a B both ready: the F (fill up to the limit)
  Fuse fuse = Fuse::never;
  bool w_fits = false;  // an optional W only when it ends before the next known input
};

constexpr double kNever = std::numeric_limits<double>::infinity();

// One run of the list scheduler under one policy. Stage d is device d (v = 1).
class ListScheduler {
 public:
  ListScheduler(int p, int m, const CostModel& costs, int limit, Policy policy)
      : s_(detail::empty_schedule("zb-auto", p, m, 1)), costs_(costs), limit_(limit),
        policy_(policy), dev_(static_cast<size_t>(p)),
        f_end_(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(m), kNever)),
        b_end_(f_end_) {}

  Schedule run() {
    double now = 0;
    while (!finished()) {
      for (bool placed = true; placed;) {  // zero-cost actions may enable more at `now`
        placed = false;
        for (int d = 0; d < s_.devices; ++d)
          if (dev(d).free_at <= now)
            if (const std::optional<Action> a = choose(d, now)) place(d, *a, now), placed = true;
      }
      now = next_event(now);
    }
    return s_;
  }

 private:
  struct Device {
    int next_f = 0, next_b = 0, next_w = 0;  // W counts fused backwards too
    double free_at = 0;
  };

  Device& dev(int d) { return dev_[static_cast<size_t>(d)]; }
  double& f_end(int st, int mb) { return f_end_[static_cast<size_t>(st)][static_cast<size_t>(mb)]; }
  double& b_end(int st, int mb) { return b_end_[static_cast<size_t>(st)][static_cast<size_t>(mb)]; }
  double cost(const Action& a) const { return action_cost(s_, costs_, a); }
  bool finished() {
    for (int d = 0; d < s_.devices; ++d)
      if (dev(d).next_w < s_.microbatches) return false;
    return true;
  }

  // When device d's next F (or B) could start as far as its inputs go; kNever while unknown.
  double f_ready(int d) {
    const int mb = dev(d).next_f;
    if (mb >= s_.microbatches) return kNever;
    return d == 0 ? 0 : f_end(d - 1, mb) + costs_.comm;
  }
  double b_ready(int d) {
    const int mb = dev(d).next_b;
    if (mb >= dev(d).next_f) return kNever;
    return d + 1 == s_.devices ? f_end(d, mb) : b_end(d + 1, mb) + costs_.comm;
  }

  std::optional<Action> choose(int d, double now) {
    Device& v = dev(d);
    const bool full = v.next_f - v.next_w >= limit_;
    const bool f_ok = !full && f_ready(d) <= now;
    const bool b_ok = b_ready(d) <= now;
    if (b_ok && !(f_ok && policy_.forward_first)) return backward(d, now);
    if (f_ok) return Action{d, Op::F, v.next_f};
    if (v.next_w == v.next_b) return std::nullopt;  // no W pending
    const Action w{d, Op::W, v.next_w};
    const bool room_needed = full && v.next_f < s_.microbatches;
    if (room_needed || !policy_.w_fits) return w;
    const double arrival = std::min(full ? kNever : f_ready(d), b_ready(d));
    if (now + cost(w) <= arrival) return w;
    return std::nullopt;
  }

  Action backward(int d, double now) {
    const Device& v = dev(d);
    const Action bw{d, Op::BW, v.next_b};
    bool fuse = false;
    if (v.next_w == v.next_b) switch (policy_.fuse) {
        case Fuse::never: break;
        case Fuse::always: fuse = true; break;
        case Fuse::first_stage: fuse = d == 0; break;
        case Fuse::upstream_busy:
          fuse = d == 0 || dev(d - 1).free_at >= now + cost(bw) + costs_.comm;
          break;
      }
    return fuse ? bw : Action{d, Op::B, v.next_b};
  }

  void place(int d, const Action& a, double now) {
    Device& v = dev(d);
    const double end = now + cost(a);
    switch (a.op) {
      case Op::F: f_end(d, v.next_f++) = end; break;
      case Op::B: b_end(d, v.next_b++) = end; break;
      case Op::W: ++v.next_w; break;
      case Op::BW: b_end(d, v.next_b++) = end, ++v.next_w; break;
    }
    v.free_at = end;
    s_.lists[static_cast<size_t>(d)].push_back(a);
  }

  // The earliest time after `now` at which a device frees up or an input arrives.
  double next_event(double now) {
    double next = kNever;
    for (int d = 0; d < s_.devices; ++d)
      for (double t : {dev(d).free_at, f_ready(d), b_ready(d)})
        if (t > now) next = std::min(next, t);
    if (next == kNever)  // cannot happen: every device either has work coming or is done
      throw std::logic_error("zb-auto: the list scheduler stalled at t=" + std::to_string(now));
    return next;
  }

  Schedule s_;
  const CostModel& costs_;
  int limit_;
  Policy policy_;
  std::vector<Device> dev_;
  std::vector<std::vector<double>> f_end_, b_end_;  // [stage][micro-batch]; kNever: not placed
};

}  // namespace

Schedule zb_auto(int devices, int microbatches, const CostModel& costs, int max_in_flight) {
  detail::empty_schedule("zb-auto", devices, microbatches, 1);  // checks p, m >= 1
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != devices)
    throw std::invalid_argument("zb-auto: the cost model has " +
                                std::to_string(costs.stages.size()) + " stage costs for " +
                                std::to_string(devices) + " devices (one stage per device)");
  const int limit = max_in_flight == 0 ? devices : max_in_flight;
  if (limit < 1)
    throw std::invalid_argument("zb-auto: max in-flight micro-batches must be at least 1, got " +
                                std::to_string(max_in_flight));

  std::vector<Schedule> candidates;
  for (bool forward_first : {false, true})
    for (Fuse fuse : {Fuse::never, Fuse::first_stage, Fuse::upstream_busy, Fuse::always})
      for (bool w_fits : {false, true})
        candidates.push_back(
            ListScheduler(devices, microbatches, costs, limit, {forward_first, fuse, w_fits}).run());
  // The hand-made schedules, where they fit the memory limit (1F1B holds p - d, ZB-H1 p).
  if (limit >= devices) candidates.push_back(one_f_one_b(devices, microbatches));
  if (limit >= devices) candidates.push_back(zb_h1(devices, microbatches));

  size_t best = 0;
  double best_makespan = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double makespan = simulate(candidates[i], costs).stats.makespan;
    if (i == 0 || makespan < best_makespan * (1 - 1e-12)) best = i, best_makespan = makespan;
  }
  Schedule s = std::move(candidates[best]);
  s.name = "zb-auto";
  return s;
}

}  // namespace brigade::pipeline

// The list scheduler behind the zero-bubble generators that plan rather than follow a fixed
// pattern: zb-auto, zb-h2, zb-v, v-half, v-min and interleaved-zb are each this one greedy
// scheduler, under a memory budget, over a placement (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 3, the heuristic half of its automatic scheduling, and the
// greedy V schedules of Qi et al., "Pipeline Parallelism with Controllable Memory", 2024).
//
// It plays one step forward in time by the simulator's rules (an action starts when its device
// is free and its inputs exist, + comm across devices). A free device picks:
//   1. a ready B, the deepest stage first: its input gradient unblocks a device upstream
//      (unless the policy fills the pipeline first and an F is ready too);
//   2. a ready F the budget admits (below): the shallowest stage first, or the deepest (the
//      policy's `deepest_forward`: a micro-batch's later chunks before a new micro-batch);
//   3. the oldest pending W: to make room for the next micro-batch, or to fill a wait (with
//      `w_fits`: only if it ends before the device's next input is known to arrive);
//   otherwise it waits for the next event.
// A B is fused into BW when no W is pending on the device and the policy says so: never,
// always, on the first stage only (nobody waits for its input gradient), or when the device
// upstream is busy past the BW's end anyway. W's run oldest first, so each stage adds its
// weight gradients in micro-batch order, the order one device adds them in.
//
// The budget counts the activations a device holds, in chunk-micro-batches: one micro-batch of
// one stage, from the start of its F to the end of its W (or BW). A micro-batch enters a device
// through the F of the device's first stage, and that F reserves room for every chunk the
// micro-batch will hold there; its later chunks' F's then never wait for memory. Without the
// reservation a V-shaped device could fill up with first chunks whose backwards wait for second
// chunks it has no room for: a deadlock. So no device ever holds more than the budget, and a
// budget of v (one whole micro-batch) is all that progress needs. A policy may reserve for
// fewer micro-batches (ListPolicy::reserved): the published ZB-V's device 0 runs ~2p first
// chunks before the first micro-batch comes back, which full reservations forbid at 1F1B's
// memory. Such a run can stall; it is then dropped, and the full-reservation runs remain.
#pragma once

#include <vector>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

enum class Fuse { never, first_stage, upstream_busy, always };

struct ListPolicy {
  bool forward_first = false;    // an F and a B both ready: the F (fill up to the budget)
  Fuse fuse = Fuse::never;
  bool w_fits = false;           // an optional W only where it ends before the next input
  bool deepest_forward = false;  // several F's ready (chunks): the deepest stage's
  // Room an admission keeps for the later chunks of admitted micro-batches: for every one of
  // them (0, the safe rule the header describes), or only for the `reserved` oldest. Later
  // chunks run in micro-batch order, so room for the oldest is what the next one needs; a
  // smaller reservation lets a V's device 0 fill its warm-up with first chunks while the
  // micro-batch comes back, as the published ZB-V does. It may stall: the runs that do are
  // dropped (shortest_list_schedule).
  int reserved = 0;
};

struct ListProblem {
  const char* name;
  int devices = 1, microbatches = 1, chunks = 1;
  Placement placement = Placement::looped;
  int budget = 1;  // chunk-micro-batches a device may hold; at least `chunks`
  CostModel costs;  // per stage (devices · chunks of them) or uniform
  // [device]: each device's own budget in place of `budget` (devices of different memory);
  // empty: every device has `budget`.
  std::vector<int> device_budgets = {};

  int budget_of(int device) const {
    return device_budgets.empty() ? budget : device_budgets.at(static_cast<size_t>(device));
  }
};

// One run under one policy. Throws std::invalid_argument for a budget under `chunks`, device
// budgets not one per device, or a cost model of the wrong size.
Schedule list_schedule(const ListProblem& problem, const ListPolicy& policy);

// Every policy (chunks > 1 adds deepest_forward's two choices and reservations for 1 and 2
// micro-batches besides every one), plus `hand_made` (schedules of the same shape the caller
// knows, e.g. 1f1b, zb-h1 or a building-block pattern) where they stay within the budget, plus
// the few shortest of those squeezed within the memory each holds (squeeze.h). The shortest by
// the simulator; between equally short ones the shortest with every B twice as long, then the
// one holding least, then the shortest with every B twice as long and a transfer of a tenth of
// a device's F besides (then the first: policies before hand-made ones); named problem.name.
Schedule shortest_list_schedule(const ListProblem& problem,
                                std::vector<Schedule> hand_made = {});

}  // namespace brigade::pipeline

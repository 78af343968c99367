// The zero-bubble authors' automatic scheduler without its ILP (Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024, section 3.1): Graph.manual_order and initial_solution of
// sail-sg/zero-bubble-pipeline-parallelism, megatron/core/pipeline_parallel/auto_schedule.py
// (the same heuristic is zerobubble/scheduler/zb.py), written here in C++. zb-h1, zb-h2 and
// zb-auto try its orders beside their own, so that with the costs they are given none is
// slower than the authors' ZB-H1 (memory p) and ZB-H2 (memory 2p).
//
// It plays the stages forward one micro-batch at a time, from the costs f, b, w and comm: for
// the first micro-batch, as many warm-up F's on each stage as fit before its input gradient
// can come back (and memory allows); then, for each micro-batch, an F on every stage that
// wants one and a B on every stage, deepest first. W's go where memory runs out, where a W
// ends before the next input arrives, or where the device would wait longer than the worst
// stage's bubble so far. Three switches change its choices; the authors run all eight
// settings and keep the shortest (then refine it by an ILP, which is not written here).
//
// Memory is counted as Brigade counts it (validate.h's peak_live): an F takes one micro-batch
// and its W gives it back (the authors' mem_f = 1, mem_b = 0, mem_w = -1), so `max_mem[d]` is
// device d's budget in the micro-batches Brigade's generators count.
#pragma once

#include <optional>
#include <vector>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct HeuristicSwitches {
  bool allow_bubble_before_first_b = false;
  bool prioritize_b = false;
  bool no_bubble_greedy = true;
};

struct HeuristicOrder {
  Schedule schedule;  // p stages on p devices, split backward
  double end = 0;     // when its last action ends by the heuristic's own clock
};

// The order of one setting, or nothing where the heuristic gives up ("Cannot fit memory", or
// its closing check that each action ends after its inputs: on uneven stages its warm-up can
// put an F before the F it needs).
// Costs: CostModel::stage(d) and CostModel::comm; max_mem: one budget per device, each >= 1.
std::optional<HeuristicOrder> zero_bubble_heuristic(int devices, int microbatches,
                                                    const CostModel& costs,
                                                    const std::vector<int>& max_mem,
                                                    HeuristicSwitches switches);

// The orders of all eight settings that fit, as initial_solution tries them.
std::vector<Schedule> zero_bubble_heuristic_orders(int devices, int microbatches,
                                                   const CostModel& costs,
                                                   const std::vector<int>& max_mem);

// `own`, unless one of the heuristic's orders within `max_mem` is strictly shorter by the
// simulator with `costs`: then the shortest of those (the first of equals), named as `own`.
Schedule own_or_heuristic(Schedule own, const CostModel& costs, const std::vector<int>& max_mem);

}  // namespace brigade::pipeline

// The V-shaped schedules: two chunks per device in the v-shape placement (schedule.h), so
// device d holds stages d and 2p-1-d. A micro-batch goes down the devices through the first
// chunks and back up through the second ones; device 0 both starts and ends it. Qi et al.'s
// "Pipeline Parallelism with Controllable Memory" (2024) shows that this shape lets one choose
// the activation memory and pay for less of it in bubbles than 1F1B does:
//
//   zb-v    ZB-V (the zero-bubble paper's, ICLR 2024): 1F1B's peak memory, p micro-batches of
//           a device's share (2p chunks), and next to no bubble;
//   v-half  about half of 1F1B's memory (p/2 + 1 micro-batches), about half of its bubble;
//   v-min   about a third of it (floor((p + 1) / 3) + 1), about 1F1B's bubble.
//
// Each is the list scheduler (list_scheduler.h) under that budget, in chunk-micro-batches of a
// device: zb-v 2p, v-half p + 2, v-min 2 floor((p + 1) / 3) + 2 (what the paper's building
// block below holds: 2 micro-batches at p = 4, as the authors' V-Min). zb-v also tries the
// paper's ZB-V as drawn (zb_v_as_drawn, below). v-half and v-min also
// try the paper's own construction, a building block repeated every micro-batch (below): as
// it is, reordered as the authors' generator does, and squeezed (squeeze.h); they keep the
// order the simulator finds shortest with F = B = W (then with B = 2F: list_scheduler.h). The
// building block: in a steady state every device runs 6 actions per micro-batch (F, B and W
// of two chunks, a unit each), so micro-batch k's actions sit at fixed offsets + 6k; the
// offsets (F of chunk 0, F of chunk 1, B of chunk 1, B of chunk 0) make every dependency land
// after its producer and the lifespans add up to the memory asked for, and the W's fill the
// free units, oldest first:
//
//   v-min,  device i: i,   2p - 1 - i,  2p + g + i,      4p + g - 1 - i      (g = 2 if 3 | p)
//   v-half, device i: 2i,  3p - 2 - i,  3p + g + 2i - 1,  6p + g - 2 - i      (g = 3 if 2 | p)
//
// The block leaves idle units in its warm-up and cool-down; the paper moves actions earlier
// into them where memory allows (its "reordering": reorder_as_published, and squeeze() more
// generally). With both, v-half and v-min are as short as the authors' orders at F = B = W
// and at f = 1, b = 2, w = 1, at no more memory (docs/schedules.md has the table).
#include <array>
#include <algorithm>
#include <map>
#include <string>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"
#include "pipeline/schedule/generators/squeeze.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

enum class Block { v_min, v_half };

// The building block's four offsets for device i: F of chunk 0, F of chunk 1, B of chunk 1,
// B of chunk 0 (in units where each action costs 1; a micro-batch adds 6).
std::array<int, 4> block_offsets(Block block, int p, int i) {
  if (block == Block::v_min) {
    const int g = p % 3 == 0 ? 2 : 0;
    return {i, 2 * p - 1 - i, 2 * p + g + i, 4 * p + g - 1 - i};
  }
  const int g = p % 2 == 0 ? 3 : 0;
  return {2 * i, 3 * p - 2 - i, 3 * p + g + 2 * i - 1, 6 * p + g - 2 - i};
}

// The building block's F's and B's for m micro-batches, each in its unit.
UnitTimes building_block_units(Block block, int p, int m) {
  UnitTimes units(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    const int first = i, second = 2 * p - 1 - i;  // device i's stages
    const std::array<int, 4> at = block_offsets(block, p, i);
    std::map<int, Action>& unit = units[static_cast<size_t>(i)];
    for (int k = 0; k < m; ++k) {
      unit[at[0] + 6 * k] = {first, Op::F, k};
      unit[at[1] + 6 * k] = {second, Op::F, k};
      unit[at[2] + 6 * k] = {second, Op::B, k};
      unit[at[3] + 6 * k] = {first, Op::B, k};
    }
  }
  return units;
}

// The building block as it is (W's in the free units, oldest first), reordered as the authors'
// generator does (their V-Half and V-Min), and squeezed (squeeze.h) within the budget and within
// the block's own memory, each way squeeze moves.
std::vector<Schedule> building_block_schedules(const char* name, Block block, int p, int m,
                                               int budget) {
  Schedule shape = detail::empty_schedule(name, p, m, 2);
  shape.placement = Placement::v_shape;
  const UnitTimes units = building_block_units(block, p, m);
  Schedule as_built = shape;
  for (int d = 0; d < p; ++d)
    as_built.lists[static_cast<size_t>(d)] = with_weights(units[static_cast<size_t>(d)]);
  std::vector<int> own;
  for (const DeviceStats& d : simulate(as_built, CostModel{}).stats.devices)
    own.push_back(std::min(budget, d.peak_in_flight));
  std::vector<Schedule> out = {as_built, reorder_as_published(shape, units)};
  for (Squeeze order : {Squeeze::in_time, Squeeze::backwards_first, Squeeze::backwards_only})
    for (const std::vector<int>& budgets : {std::vector<int>(static_cast<size_t>(p), budget), own})
      out.push_back(squeeze(shape, units, budgets, order));
  return out;
}

// ZB-V as the zero-bubble paper draws it (Qi et al., ICLR 2024, section 6; PyTorch's
// ScheduleZBVZeroBubble writes the same lists). Device d, with stages d (first) and 2p - 1 - d
// (second), over max(2p - 1, m) micro-batches, the ones past m left out:
//   warm-up    2(p - d) - 1 F's of the first stage; d times an F of the second and one of
//              the first; p - d times F, B, W of the second;
//   steady     F of the first (while any is left), B and W of the first, F, B and W of the
//              second, until every F has run;
//   cool-down  d times B of the first and B of the second; p - d times B and W of the first;
//              the W's left, the second stage's first.
// Its B's and W's stay together, so a B that costs twice an F delays only its own W: at
// f = 1, b = 2, w = 1 it is much shorter than the list scheduler's orders planned for F = B = W
// (35 against 40.5 at p = 4, m = 8), and as short at F = B = W from m = 2p on.
Schedule zb_v_as_drawn(int p, int m) {
  Schedule s = detail::empty_schedule("zb-v", p, m, 2);
  s.placement = Placement::v_shape;
  const int pattern_m = std::max(2 * p - 1, m);
  for (int d = 0; d < p; ++d) {
    std::vector<Action>& list = s.lists[static_cast<size_t>(d)];
    const int first = d, second = 2 * p - 1 - d;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0, w0 = 0, w1 = 0;
    const auto add = [&](int stage, Op op, int& next) {
      if (next < m) list.push_back({stage, op, next});
      ++next;
    };
    for (int i = 0; i < 2 * (p - d) - 1; ++i) add(first, Op::F, f0);
    for (int i = 0; i < d; ++i) add(second, Op::F, f1), add(first, Op::F, f0);
    for (int i = 0; i < p - d; ++i)
      add(second, Op::F, f1), add(second, Op::B, b1), add(second, Op::W, w1);
    while (f1 < f0 || f0 < pattern_m) {
      if (f0 < pattern_m) add(first, Op::F, f0);
      add(first, Op::B, b0), add(first, Op::W, w0);
      add(second, Op::F, f1), add(second, Op::B, b1), add(second, Op::W, w1);
    }
    for (int i = 0; i < d; ++i) add(first, Op::B, b0), add(second, Op::B, b1);
    for (int i = 0; i < p - d; ++i) add(first, Op::B, b0), add(first, Op::W, w0);
    while (w1 < b1) add(second, Op::W, w1);
    while (w0 < b0) add(first, Op::W, w0);
  }
  return s;
}

// p and m are checked by the first schedule made: the building block, or list_schedule's.
Schedule v_schedule(const char* name, int p, int m, int budget, std::vector<Schedule> hand_made) {
  return shortest_list_schedule({.name = name, .devices = p, .microbatches = m, .chunks = 2,
                                 .placement = Placement::v_shape, .budget = budget, .costs = {}},
                                std::move(hand_made));
}

}  // namespace

Schedule zb_v(int devices, int microbatches) {
  detail::empty_schedule("zb-v", devices, microbatches, 2);  // checks p and m
  return v_schedule("zb-v", devices, microbatches, 2 * devices,
                    {zb_v_as_drawn(devices, microbatches)});
}

Schedule v_half(int devices, int microbatches) {
  return v_schedule("v-half", devices, microbatches, devices + 2,
                    building_block_schedules("v-half", Block::v_half, devices, microbatches,
                                             devices + 2));
}

Schedule v_min(int devices, int microbatches) {
  const int budget = 2 * ((devices + 1) / 3) + 2;
  return v_schedule("v-min", devices, microbatches, budget,
                    building_block_schedules("v-min", Block::v_min, devices, microbatches, budget));
}

}  // namespace brigade::pipeline

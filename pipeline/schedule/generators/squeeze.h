// squeeze(): a pass that moves a unit-cost schedule's forwards and input-gradient backwards
// earlier into the units where their device idles, while no device holds more than its
// memory. The controllable-memory paper (Qi et al., 2024) builds V-Half and V-Min this way: a
// building block repeated every micro-batch leaves idle units in the warm-up and cool-down,
// which the pass fills. Brigade runs it over the building block's own units and over any
// candidate order, timed by the simulator (list_scheduler.h keeps the shortest).
//
// With every action one unit (the zoo's planning costs, F = B = W per chunk), each F and B has
// an integer start. In the order the pass is asked for, each moves to the first unit, after its
// inputs' (already placed) units and its stage's previous micro-batch, that no placed action
// holds on its device — if the device's peak stays within its budget (or, on a device already
// above it, does not grow). Then every device's W's fill its free units again, oldest first,
// after their own B: where a device has nothing else to do, a W is the only work that frees
// memory and nobody waits for. Each stage keeps its micro-batch order, so W's still add up in
// one device's order.
#pragma once

#include <map>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

// [device]: the unit each of its F's and B's starts in.
using UnitTimes = std::vector<std::map<int, Action>>;

// One device's list from its F's and B's units: each free unit before the next one goes to the
// oldest pending W, the W's left over at the end.
std::vector<Action> with_weights(const std::map<int, Action>& units);

// The order actions move in: by their starts; every B before any F (an early B lets its W free
// memory early, which the F's moved after it may then use); or the B's alone, the F's where
// they are (less memory rather than less time).
enum class Squeeze { in_time, backwards_first, backwards_only };

// `shape` (its name, sizes and placement) with the lists of `units` squeezed, W's refilled;
// `budgets`: chunk-micro-batches per device.
Schedule squeeze(const Schedule& shape, UnitTimes units, const std::vector<int>& budgets,
                 Squeeze order);
// The same from the starts the simulator gives `s` at unit costs. A schedule with a fused BW
// is returned as it is (a BW is not one unit).
Schedule squeeze(const Schedule& s, const std::vector<int>& budgets, Squeeze order);

// The reordering the authors' generator applies to its building block (sail-sg's
// zero-bubble-pipeline-parallelism, zbv_greedy.py), which squeeze() above generalises; it
// gives their V-Half and V-Min orders. Two passes, each in time order and each within the
// memory the fullest device holds as the pass begins:
//   1. the W's laid out in the free units (with_weights), the F's, B's and W's of the warm-up
//      and the cool-down move to their first free unit after their inputs — the steady state
//      (from stage 0's first B to the last micro-batch's first F on a device) stays where the
//      block puts it; then every device runs its list as early as it can (unit costs);
//   2. without the W's (they fill the free units, oldest first), the cool-down's F's and B's
//      move earlier again.
// Its orders differ from squeeze()'s in what moves (the W's, not the steady state) and in the
// memory (the fullest device's, not each device's own): where the shortest orders tie, theirs
// may run shorter when B costs more than F (f = 1, b = 2, w = 1).
Schedule reorder_as_published(const Schedule& shape, const UnitTimes& block);

}  // namespace brigade::pipeline

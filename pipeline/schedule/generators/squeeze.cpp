#include "pipeline/schedule/generators/squeeze.h"

#include <algorithm>
#include <deque>
#include <tuple>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/need_table.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

// What with_weights lays out, and the unit each of its actions takes: the F's and B's where
// they were, the W's where they fill.
struct Filled {
  std::vector<Action> list;
  std::map<int, Action> units;
};
Filled fill_weights(const std::map<int, Action>& units) {
  Filled out;
  std::deque<Action> pending_w;
  int t = 0;
  const auto run_w = [&] {
    out.list.push_back(pending_w.front());
    out.units[t++] = pending_w.front();
    pending_w.pop_front();
  };
  for (const auto& [when, a] : units) {
    while (t < when && !pending_w.empty()) run_w();
    t = when + 1;
    out.list.push_back(a);
    out.units[when] = a;
    if (a.op == Op::B) pending_w.push_back({a.stage, Op::W, a.microbatch});
  }
  while (!pending_w.empty()) run_w();
  return out;
}

// The most chunk-micro-batches a device holds once with_weights has laid out its units (an
// F's start adds one, a W's end takes it away): counted, not laid out, as the passes below
// ask it for every unit they try.
int peak_with_weights(const std::map<int, Action>& units) {
  int held = 0, peak = 0, pending_w = 0, t = 0;
  for (const auto& [when, a] : units) {
    const int ran = std::min(pending_w, std::max(0, when - t));  // W's in the free units
    held -= ran;
    pending_w -= ran;
    t = when + 1;
    if (a.op == Op::F) peak = std::max(peak, ++held);
    if (a.op == Op::B) ++pending_w;
  }
  return peak;
}

// The most chunk-micro-batches a device holds whose units have their W's placed already.
int peak_of_placed(const std::map<int, Action>& units) {
  int held = 0, peak = 0;
  for (const auto& [when, a] : units) {
    if (a.op == Op::F) peak = std::max(peak, ++held);
    if (a.op == Op::W) --held;
  }
  return peak;
}

// Moves `a`, in unit `when` of `mine`, to the first free unit from `earliest` on where
// `fits(mine)` holds; returns the unit it ends in (`when` if none fits).
template <class Fits>
int move_to_first_fit(std::map<int, Action>& mine, const Action& a, int earliest, int when,
                      const Fits& fits) {
  for (int t = earliest; t < when; ++t) {
    if (mine.count(t)) continue;  // placed, or not yet and starting there
    mine.erase(when);
    mine[t] = a;
    if (fits(mine)) return t;
    mine.erase(t);
    mine[when] = a;
  }
  return when;
}

// [device]: the unit each F and B of `s` starts in, run at unit costs.
UnitTimes unit_starts(const Schedule& s) {
  UnitTimes units(static_cast<size_t>(s.devices));
  for (const TimelineEvent& e : simulate(s, CostModel{}).timeline.events)
    if (e.action.op == Op::F || e.action.op == Op::B)
      units[static_cast<size_t>(e.device)][static_cast<int>(e.start + 0.5)] = e.action;
  return units;
}

// `shape` with each device's F's and B's as its list, the W's in the free units.
Schedule with_lists(const Schedule& shape, const UnitTimes& units) {
  Schedule out = shape;
  for (int d = 0; d < shape.devices; ++d)
    out.lists[static_cast<size_t>(d)] = fill_weights(units[static_cast<size_t>(d)]).list;
  return out;
}

Phase phase_of(Op op) {
  return op == Op::F ? Phase::Forward : op == Op::W ? Phase::WeightGrad : Phase::InputGrad;
}

}  // namespace

std::vector<Action> with_weights(const std::map<int, Action>& units) {
  return fill_weights(units).list;
}

Schedule squeeze(const Schedule& shape, UnitTimes units, const std::vector<int>& budgets,
                 Squeeze order) {
  // (pass, unit, device, action), in the order they are placed.
  std::vector<std::tuple<int, int, int, Action>> queue;
  NeedTable<int> unit(shape.stages(), shape.microbatches, -1);  // where each F and B starts
  for (int d = 0; d < shape.devices; ++d)
    for (const auto& [when, a] : units[static_cast<size_t>(d)]) {
      const int pass = order != Squeeze::in_time && a.op == Op::F ? 1 : 0;
      queue.emplace_back(pass, when, d, a);
      unit[{a.stage, phase_of(a.op), a.microbatch}] = when;
    }
  std::sort(queue.begin(), queue.end());

  for (const auto& [pass, when, d, a] : queue) {
    int earliest = 0;
    for (const Need& n : needs(a, shape.stages())) earliest = std::max(earliest, unit[n] + 1);
    if (a.microbatch > 0)  // the stage's micro-batch order stays
      earliest = std::max(earliest, unit[{a.stage, phase_of(a.op), a.microbatch - 1}] + 1);
    std::map<int, Action>& mine = units[static_cast<size_t>(d)];
    const int allowed = std::max(budgets.at(static_cast<size_t>(d)), peak_with_weights(mine));
    const bool stays = pass == 1 && order == Squeeze::backwards_only;
    const int now = stays ? when : move_to_first_fit(mine, a, earliest, when, [&](const auto& u) {
      return peak_with_weights(u) <= allowed;
    });
    unit[{a.stage, phase_of(a.op), a.microbatch}] = now;
  }

  return with_lists(shape, units);
}

Schedule squeeze(const Schedule& s, const std::vector<int>& budgets, Squeeze order) {
  for (const auto& list : s.lists)
    for (const Action& a : list)
      if (a.op == Op::BW) return s;
  return squeeze(s, unit_starts(s), budgets, order);
}

namespace {

enum class Moving { warm_up_and_cool_down, cool_down };

// One pass of reorder_as_published over `units` (with the W's among them or not).
void reorder_pass(const Schedule& shape, UnitTimes& units, bool weights_placed, Moving moving) {
  const auto peak = [&](const std::map<int, Action>& u) {
    return weights_placed ? peak_of_placed(u) : peak_with_weights(u);
  };
  int limit = 0;  // the fullest device's memory
  for (const auto& u : units) limit = std::max(limit, peak(u));
  std::vector<std::tuple<int, int, Action>> queue;  // (unit, device, action)
  NeedTable<int> unit(shape.stages(), shape.microbatches, -1);
  for (int d = 0; d < shape.devices; ++d)
    for (const auto& [when, a] : units[static_cast<size_t>(d)]) {
      queue.emplace_back(when, d, a);
      unit[{a.stage, phase_of(a.op), a.microbatch}] = when;
    }
  std::sort(queue.begin(), queue.end());

  enum { warm_up, steady, cool_down } part = warm_up;
  std::vector<int> last_w(static_cast<size_t>(shape.devices), -1);  // a device's W's keep order
  for (const auto& [when, d, a] : queue) {
    if (part == warm_up && a.stage == 0 && a.op == Op::B) part = steady;
    const bool stays = part == steady || (part == warm_up && moving == Moving::cool_down);
    if (part == steady && a.op == Op::F && a.microbatch == shape.microbatches - 1 &&
        a.stage == shape.stages_on(d).front())
      part = cool_down;
    int now = when;
    if (!stays) {
      int earliest = 0;
      for (const Need& n : needs(a, shape.stages())) earliest = std::max(earliest, unit[n] + 1);
      if (a.microbatch > 0)
        earliest = std::max(earliest, unit[{a.stage, phase_of(a.op), a.microbatch - 1}] + 1);
      if (a.op == Op::W) earliest = std::max(earliest, last_w[static_cast<size_t>(d)] + 1);
      now = move_to_first_fit(units[static_cast<size_t>(d)], a, earliest, when,
                              [&](const auto& u) { return peak(u) <= limit; });
    }
    if (a.op == Op::W) last_w[static_cast<size_t>(d)] = now;
    unit[{a.stage, phase_of(a.op), a.microbatch}] = now;
  }
}


}  // namespace

Schedule reorder_as_published(const Schedule& shape, const UnitTimes& block) {
  UnitTimes units(block.size());
  for (size_t d = 0; d < block.size(); ++d) units[d] = fill_weights(block[d]).units;
  reorder_pass(shape, units, true, Moving::warm_up_and_cool_down);
  Schedule placed = shape;  // run as early as it can, then the W's dropped
  for (int d = 0; d < shape.devices; ++d)
    for (const auto& [when, a] : units[static_cast<size_t>(d)])
      placed.lists[static_cast<size_t>(d)].push_back(a);
  units = unit_starts(placed);
  reorder_pass(shape, units, false, Moving::cool_down);
  return with_lists(shape, unit_starts(with_lists(shape, units)));
}

}  // namespace brigade::pipeline

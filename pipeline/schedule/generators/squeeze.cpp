#include "pipeline/schedule/generators/squeeze.h"

#include <algorithm>
#include <deque>
#include <tuple>

#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/need_table.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

// What with_weights lays out, and the most chunk-micro-batches the device then holds (an F's
// start adds one, a W's end takes it away).
struct Filled {
  std::vector<Action> list;
  int peak = 0;
};
Filled fill_weights(const std::map<int, Action>& units) {
  Filled out;
  std::deque<Action> pending_w;
  int held = 0, t = 0;
  for (const auto& [when, a] : units) {
    for (; t < when && !pending_w.empty(); ++t) {
      out.list.push_back(pending_w.front());
      pending_w.pop_front();
      --held;
    }
    t = when + 1;
    out.list.push_back(a);
    if (a.op == Op::F) out.peak = std::max(out.peak, ++held);
    if (a.op == Op::B) pending_w.push_back({a.stage, Op::W, a.microbatch});
  }
  out.list.insert(out.list.end(), pending_w.begin(), pending_w.end());
  return out;
}

Phase phase_of(Op op) { return op == Op::F ? Phase::Forward : Phase::InputGrad; }

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
    const int allowed = std::max(budgets.at(static_cast<size_t>(d)), fill_weights(mine).peak);
    const bool stays = pass == 1 && order == Squeeze::backwards_only;
    int now = when;
    for (int t = earliest; t < when && !stays; ++t) {
      if (mine.count(t)) continue;  // placed, or not yet and starting there
      mine.erase(now);
      mine[t] = a;
      if (fill_weights(mine).peak <= allowed) {
        now = t;
        break;
      }
      mine.erase(t);
      mine[now] = a;
    }
    unit[{a.stage, phase_of(a.op), a.microbatch}] = now;
  }

  Schedule out = shape;
  for (int d = 0; d < shape.devices; ++d)
    out.lists[static_cast<size_t>(d)] = with_weights(units[static_cast<size_t>(d)]);
  return out;
}

Schedule squeeze(const Schedule& s, const std::vector<int>& budgets, Squeeze order) {
  for (const auto& list : s.lists)
    for (const Action& a : list)
      if (a.op == Op::BW) return s;
  UnitTimes units(static_cast<size_t>(s.devices));
  for (const TimelineEvent& e : simulate(s, CostModel{}).timeline.events)
    if (e.action.op == Op::F || e.action.op == Op::B)
      units[static_cast<size_t>(e.device)][static_cast<int>(e.start + 0.5)] = e.action;
  return squeeze(s, std::move(units), budgets, order);
}

}  // namespace brigade::pipeline

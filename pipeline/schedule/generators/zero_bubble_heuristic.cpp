// The authors' manual_order (zero_bubble_heuristic.h), step by step as they wrote it; their
// names in the comments. Times are end times, as theirs: an action put on stage j ends at
// max(stage j's last end, its input's end + comm) + its cost.
#include "pipeline/schedule/generators/zero_bubble_heuristic.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

class Player {
 public:
  Player(int devices, int microbatches, const CostModel& costs, const std::vector<int>& max_mem)
      : p_(devices), m_(microbatches), costs_(costs), max_mem_(max_mem),
        count_(static_cast<size_t>(devices)), memory_(static_cast<size_t>(devices)),
        end_(static_cast<size_t>(devices)), bubble_(static_cast<size_t>(devices)),
        done_(static_cast<size_t>(devices),
              std::array<std::vector<double>, 3>{std::vector<double>(size_t(microbatches)),
                                                 std::vector<double>(size_t(microbatches)),
                                                 std::vector<double>(size_t(microbatches))}),
        lists_(static_cast<size_t>(devices)) {}

  // Ops F, B, W as the authors' types 0, 1, 2.
  static constexpr int F = 0, B = 1, W = 2;

  int count(int j, int type) const { return count_[size_t(j)][size_t(type)]; }
  double cost(int j, int type) const {
    const StageCost& c = costs_.stage(j);
    return type == F ? c.f : type == B ? c.b : c.w;
  }
  static int mem(int type) { return type == F ? 1 : type == B ? 0 : -1; }
  double done(int j, int type, int mb) const { return done_[size_t(j)][size_t(type)][size_t(mb)]; }
  double max_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }

  // put(stage_j, type_k): the next action of that type on stage j.
  void put(int j, int type) {
    const int mb = count(j, type);
    const double c = cost(j, type);
    const double no_bubble = end_[size_t(j)] + c;
    double end = no_bubble;
    if (j > 0 && type == F) end = std::max(end, done(j - 1, F, mb) + costs_.comm + c);
    if (j < p_ - 1 && type == B) end = std::max(end, done(j + 1, B, mb) + costs_.comm + c);
    if (count(j, F) > 0) bubble_[size_t(j)] += end - no_bubble;
    end_[size_t(j)] = end;
    done_[size_t(j)][size_t(type)][size_t(mb)] = end;
    memory_[size_t(j)] += mem(type);
    ++count_[size_t(j)][size_t(type)];
    lists_[size_t(j)].push_back({j, type == F ? Op::F : type == B ? Op::B : Op::W, mb});
  }

  // W's until an action taking `needs` fits: false where none is left ("Cannot fit memory").
  bool make_room(int j, int needs) {
    while (memory_[size_t(j)] + needs > max_mem_[size_t(j)]) {
      if (count(j, W) >= count(j, B)) return false;
      put(j, W);
    }
    return true;
  }

  // Before an action whose input ends at `input_end` (+ comm): W's that end before the input
  // arrives, then one more W if the device would still wait, unless that wait is within the
  // worst stage's bubble and no_bubble_greedy is off.
  void fill_wait(int j, double input_end, bool no_bubble_greedy) {
    const double arrives = input_end + costs_.comm;
    while (count(j, W) < count(j, B) && end_[size_t(j)] + cost(j, W) <= arrives) put(j, W);
    if (count(j, W) < count(j, B) && end_[size_t(j)] < arrives) {
      if (arrives - end_[size_t(j)] <= max_bubble() - bubble_[size_t(j)]) {
        if (no_bubble_greedy) put(j, W);
      } else {
        put(j, W);
      }
    }
  }

  // The first micro-batch (i == 0): its F on every stage, then on each stage the warm-up F's
  // that fit before its B can start, counted from the last stage back.
  void warm_up(bool allow_bubble_before_first_b) {
    for (int j = 0; j < p_; ++j) put(j, F);
    std::vector<int> required(size_t(p_), 0);  // f_required
    double last_t = 0;
    for (int j = p_ - 1; j >= 0; --j) {
      if (j == p_ - 1) {
        last_t = done(j, F, 0) + cost(j, B);
        continue;
      }
      int memory = memory_[size_t(j)];
      double busy_until = end_[size_t(j)];
      while (count(j, F) + required[size_t(j)] < m_ && memory + mem(F) <= max_mem_[size_t(j)]) {
        if (allow_bubble_before_first_b ? busy_until + cost(j, F) > last_t + costs_.comm
                                        : busy_until >= last_t + costs_.comm)
          break;
        memory += mem(F);
        busy_until += cost(j, F);
        ++required[size_t(j)];
      }
      last_t = std::max(busy_until, last_t + costs_.comm) + cost(j, B);
    }
    // A stage runs fewer warm-up F's than the one before it (while it has F's left to run).
    for (int j = 1; j < p_; ++j)
      while (required[size_t(j)] > 0 && required[size_t(j)] >= required[size_t(j - 1)] &&
             count(j, F) + required[size_t(j)] < m_)
        --required[size_t(j)];
    for (int j = 0; j < p_; ++j)
      for (int k = 0; k < required[size_t(j)]; ++k) put(j, F);
    for (int j = p_ - 1; j >= 0; --j) put(j, B);
  }

  // Micro-batch i >= 1: an F on the stages that want one, then B of i on every stage.
  bool steady(int i, HeuristicSwitches s) {
    std::vector<int> required(size_t(p_), 0);
    for (int j = 0; j < p_; ++j) {
      if (count(j, F) >= m_) continue;
      required[size_t(j)] = wants_forward(j, s.prioritize_b) ? 1 : 0;
    }
    for (int j = p_ - 2; j >= 0; --j)
      required[size_t(j)] = std::min(required[size_t(j)], required[size_t(j + 1)]);
    for (int j = 0; j < p_; ++j) {
      if (required[size_t(j)] == 0) continue;
      if (!make_room(j, mem(F))) return false;
      if (j > 0) fill_wait(j, done(j - 1, F, count(j, F)), s.no_bubble_greedy);
      put(j, F);
    }
    for (int j = p_ - 1; j >= 0; --j) {
      if (!make_room(j, mem(B))) return false;
      if (j + 1 < p_) fill_wait(j, done(j + 1, B, i), s.no_bubble_greedy);
      if (j == 0 && count(j, F) == m_)
        while (count(j, W) < count(j, B)) put(j, W);
      put(j, B);
    }
    return true;
  }

  // With prioritize_b, a stage two or more F's ahead of the next one skips its F when that
  // would delay the next stage's B (next_plus_fw), unless the skip would only open a wait
  // within the worst bubble so far.
  bool wants_forward(int j, bool prioritize_b) const {
    if (!(prioritize_b && j + 1 < p_ && count(j, F) >= count(j + 1, F) + 2)) return true;
    const double next_plus_fw = end_[size_t(j + 1)] + cost(j + 1, F) + cost(j + 1, B) + costs_.comm;
    if (end_[size_t(j)] >= next_plus_fw) return false;
    double w_cost = 0;
    int w_count = 0, memory_with_w = memory_[size_t(j)] + mem(F);
    while (memory_with_w > max_mem_[size_t(j)] && count(j, W) + w_count < count(j, B)) {
      w_cost += cost(j, W);
      memory_with_w += mem(W);
      ++w_count;
    }
    if (end_[size_t(j)] + cost(j, F) + w_cost <= next_plus_fw) return true;
    // (The authors reset w_cost to 0 here, their search for more W's left commented out.)
    return !(next_plus_fw - end_[size_t(j)] <= max_bubble() - bubble_[size_t(j)]);
  }

  void finish() {
    for (int j = 0; j < p_; ++j)
      while (count(j, W) < m_) put(j, W);
  }

  // The authors' closing checks: every action ends at least its cost after what it needs
  // (+ comm across devices). An order that put an action before its input fails them.
  bool times_hold() const {
    const double comm = costs_.comm, slack = 1e-9;
    for (int j = 0; j < p_; ++j)
      for (int mb = 0; mb < m_; ++mb) {
        if (done(j, B, mb) + slack < done(j, F, mb) + cost(j, B)) return false;
        if (done(j, W, mb) + slack < done(j, B, mb) + cost(j, W)) return false;
        if (j > 0 && done(j, F, mb) + slack < done(j - 1, F, mb) + comm + cost(j, F)) return false;
        if (j + 1 < p_ && done(j, B, mb) + slack < done(j + 1, B, mb) + comm + cost(j, B))
          return false;
      }
    return true;
  }

  std::vector<std::vector<Action>> lists() const { return lists_; }
  double end() const { return *std::max_element(end_.begin(), end_.end()); }

 private:
  int p_, m_;
  const CostModel& costs_;
  std::vector<int> max_mem_;  // [stage]
  std::vector<std::array<int, 3>> count_;  // f, b, w
  std::vector<int> memory_;                // m
  std::vector<double> end_;                // e
  std::vector<double> bubble_;             // stage_bubble
  std::vector<std::array<std::vector<double>, 3>> done_;  // t
  std::vector<std::vector<Action>> lists_;                // the order, o
};

}  // namespace

std::optional<HeuristicOrder> zero_bubble_heuristic(int devices, int microbatches,
                                                    const CostModel& costs,
                                                    const std::vector<int>& max_mem,
                                                    HeuristicSwitches switches) {
  Schedule s = detail::empty_schedule("zero-bubble heuristic", devices, microbatches, 1);
  if (static_cast<int>(max_mem.size()) != devices)
    throw std::invalid_argument("zero-bubble heuristic: " + std::to_string(max_mem.size()) +
                                " memory budgets for " + std::to_string(devices) + " devices");
  Player play(devices, microbatches, costs, max_mem);
  play.warm_up(switches.allow_bubble_before_first_b);
  for (int i = 1; i < microbatches; ++i)
    if (!play.steady(i, switches)) return std::nullopt;
  play.finish();
  if (!play.times_hold()) return std::nullopt;  // where the authors' asserts stop their run
  s.lists = play.lists();
  return HeuristicOrder{std::move(s), play.end()};
}

std::vector<Schedule> zero_bubble_heuristic_orders(int devices, int microbatches,
                                                   const CostModel& costs,
                                                   const std::vector<int>& max_mem) {
  std::vector<Schedule> out;
  for (bool allow_bubble : {true, false})
    for (bool prioritize_b : {true, false})
      for (bool no_bubble_greedy : {true, false})
        if (auto order = zero_bubble_heuristic(devices, microbatches, costs, max_mem,
                                               {allow_bubble, prioritize_b, no_bubble_greedy}))
          out.push_back(std::move(order->schedule));
  return out;
}

Schedule own_or_heuristic(Schedule own, const CostModel& costs, const std::vector<int>& max_mem) {
  double best = simulate(own, costs).stats.makespan;
  for (Schedule& order : zero_bubble_heuristic_orders(own.devices, own.microbatches, costs, max_mem)) {
    const double makespan = simulate(order, costs).stats.makespan;
    if (makespan < best * (1 - 1e-12)) {
      best = makespan;
      order.name = own.name;
      own = std::move(order);
    }
  }
  return own;
}

}  // namespace brigade::pipeline

// makespan_lower_bound (pipeline/schedule/lower_bound.h): worked by hand on the classic
// schedules, never above the best order found by trying every order of small schedules, never
// above any generator's makespan, and each generator within the gap docs/schedules.md states.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lower_bound.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

// f, b, w for a device's whole share of the model: a chunk of v costs 1/v of each.
bp::CostModel share_costs(int chunks, double f = 1, double b = 1, double w = 1, double comm = 0) {
  bp::CostModel c;
  c.uniform = {.f = f / chunks, .b = b / chunks, .w = w / chunks};
  c.comm = comm;
  return c;
}

double makespan(const bp::Schedule& s, const bp::CostModel& c) {
  return bp::simulate(s, c).stats.makespan;
}

double bound(const bp::Schedule& s, const bp::CostModel& c) {
  return bp::makespan_lower_bound(s, c).makespan;
}

// Each (stage, micro-batch) forward, then its B or BW, then its W: the rule one device's list
// must keep whatever the others do.
bool in_order_on_its_device(const std::vector<bp::Action>& list) {
  std::map<std::pair<int, int>, int> phase;  // (stage, micro-batch) -> what ran last
  for (const bp::Action& a : list) {
    int& last = phase[{a.stage, a.microbatch}];
    const int now = a.op == bp::Op::F ? 1 : a.op == bp::Op::W ? 3 : 2;
    if (now <= last) return false;
    last = now;
  }
  return true;
}

// Every order of every device's actions (the same actions, each list permuted), kept where the
// lists are valid and no device holds more than the schedule itself does: the shortest
// makespan among them — the exact optimum the bound must not exceed. Small schedules only.
double best_order(const bp::Schedule& s, const bp::CostModel& c) {
  const std::vector<int> memory = bp::peak_live(bp::lower(s));
  std::vector<std::vector<std::vector<bp::Action>>> orders(size_t(s.devices));
  for (int d = 0; d < s.devices; ++d) {
    std::vector<bp::Action> list = s.lists[size_t(d)];
    std::sort(list.begin(), list.end());
    do
      if (in_order_on_its_device(list)) orders[size_t(d)].push_back(list);
    while (std::next_permutation(list.begin(), list.end()));
  }
  double best = 1e300;
  std::vector<size_t> pick(size_t(s.devices), 0);
  for (;;) {
    bp::Schedule t = s;
    for (int d = 0; d < s.devices; ++d) t.lists[size_t(d)] = orders[size_t(d)][pick[size_t(d)]];
    try {
      bp::validate(t);
      const std::vector<int> held = bp::peak_live(bp::lower(t));
      bool fits = true;
      for (int d = 0; d < s.devices; ++d) fits = fits && held[size_t(d)] <= memory[size_t(d)];
      if (fits) best = std::min(best, makespan(t, c));
    } catch (const bp::ScheduleError&) {  // an order that breaks a rule or deadlocks
    }
    int d = 0;
    while (d < s.devices && ++pick[size_t(d)] == orders[size_t(d)].size()) pick[size_t(d++)] = 0;
    if (d == s.devices) return best;
  }
}

}  // namespace

TEST_CASE("lower bound, worked by hand: 1F1B, ZB-H1 and naive with unit costs") {
  for (int p : {2, 3, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      CAPTURE(p);
      CAPTURE(m);
      const bp::CostModel unit = share_costs(1);
      // 1F1B's actions (BW fused, 2): the last device starts after p - 1 forwards, has 3m of
      // work, and its last BW is followed by p - 1 BW's up the pipeline: 3(m + p - 1).
      CHECK(bound(bp::one_f_one_b(p, m), unit) == doctest::Approx(3.0 * (m + p - 1)));
      CHECK(bound(bp::gpipe(p, m), unit) == doctest::Approx(3.0 * (m + p - 1)));
      // ZB-H1's (B and W split): its last action can be a W, which nothing waits for.
      CHECK(bound(bp::zb_h1(p, m), unit) == doctest::Approx(3.0 * m + p - 1));
      // naive holds one micro-batch per device: m round trips of 3p, one after another.
      CHECK(bound(bp::naive(p, m), unit) == doctest::Approx(3.0 * m * p));
      // The same actions with memory for every micro-batch: 1F1B's bound.
      CHECK(bp::makespan_lower_bound(bp::naive(p, m), unit, std::vector<int>(size_t(p), m))
                .makespan == doctest::Approx(3.0 * (m + p - 1)));
    }
}

TEST_CASE("lower bound, worked by hand: one micro-batch, uneven stages and a transfer cost") {
  // p = 2, m = 1, comm 0.5. Stage 0: F 1, B 2, W 3; stage 1: F 3, B 1, W 1 (BW = 2).
  // 1F1B: 0F0 [0,1], 1F0 [1.5,4.5], 1BW0 [4.5,6.5], 0BW0 [7,12]: the one path is everything.
  bp::CostModel c;
  c.stages = {{.f = 1, .b = 2, .w = 3}, {.f = 3, .b = 1, .w = 1}};
  c.comm = 0.5;
  const bp::MakespanBound b = bp::makespan_lower_bound(bp::one_f_one_b(2, 1), c);
  CHECK(b.makespan == doctest::Approx(12));
  CHECK(b.makespan == doctest::Approx(makespan(bp::one_f_one_b(2, 1), c)));
  CHECK(b.why.rfind("path: micro-batch 0", 0) == 0);
}

TEST_CASE("lower bound: never above the best of every order, and reached on small cases") {
  struct Case {
    bp::Schedule s;
    bp::CostModel costs;
  };
  const std::vector<Case> cases = {
      {bp::one_f_one_b(2, 2), share_costs(1)},
      {bp::one_f_one_b(2, 3), share_costs(1, 1, 2, 1, 0.25)},
      {bp::zb_h1(2, 2), share_costs(1)},
      {bp::zb_h1(2, 2), share_costs(1, 1, 2, 1)},
      {bp::naive(2, 2), share_costs(1)},
      {bp::gpipe(3, 2), share_costs(1, 2, 1, 1, 0.5)},
  };
  int reached = 0;
  for (const Case& k : cases) {
    CAPTURE(k.s.name);
    CAPTURE(k.s.microbatches);
    const double optimum = best_order(k.s, k.costs);
    const double b = bound(k.s, k.costs);
    CHECK(b <= optimum + 1e-9);
    CHECK(optimum <= makespan(k.s, k.costs) + 1e-9);  // the generator's order is one of them
    if (b >= optimum - 1e-9) ++reached;
  }
  CHECK(reached >= 5);  // the bound is the optimum itself on most of these
}

TEST_CASE("lower bound: the cost model and the memory must fit the schedule") {
  bp::CostModel three;
  three.stages.resize(3);
  CHECK_THROWS_WITH_AS(bp::makespan_lower_bound(bp::one_f_one_b(2, 2), three),
                       "lower bound of '1f1b': the cost model has 3 stage costs for 2 stages",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::makespan_lower_bound(bp::one_f_one_b(2, 2), {}, {1}),
                       "lower bound of '1f1b': 1 memory bounds for 2 devices",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::makespan_lower_bound(bp::one_f_one_b(2, 2), {}, {1, 0}),
                       "lower bound of '1f1b': a device must hold at least 1 pair, got 0",
                       std::invalid_argument);
}

// Each generator's gap to the bound, in percent, the most over p in {2, 4, 8} and m in
// {p, 2p, 4p} (where the schedule takes m), for three costs of a device's share: unit; f = 1,
// b = 2, w = 1; and that with comm = 0.1. What docs/schedules.md states; where a generator
// is not at the bound, the bound may be loose (it ignores how memory is shared by a device's
// two chunks) or the order may be (the list scheduler plans with unit costs).
struct StatedGap {
  double unit, heavy_backward, with_comm;
};
const std::map<std::string, StatedGap> kStatedGap = {
    {"naive", {0, 0, 0}},         {"gpipe", {0, 0, 0}},           {"1f1b", {0, 0, 3}},
    {"interleaved-1f1b", {0, 0, 3}}, {"looped-bfs", {0, 0, 0}},   {"zb-h1", {0, 10, 13}},
    {"zb-h2", {0, 0, 1}},         {"zb-auto", {0, 10, 13}},       {"interleaved-zb", {0, 6, 10}},
    {"zb-v", {0, 10, 13}},        {"v-half", {19, 38, 42}},       {"v-min", {30, 64, 76}},
    {"dualpipe-v", {0, 5, 9}}};

TEST_CASE("every generator is within its stated gap of the lower bound") {
  REQUIRE(kStatedGap.size() == bp::schedule_names().size());
  for (const std::string& name : bp::schedule_names())
    for (int p : {2, 4, 8})
      for (int m : {p, 2 * p, 4 * p}) {
        if (name == "dualpipe-v" && m < 2 * p) continue;  // DualPipeV needs m >= 2p
        const int v = bp::default_chunks(name);
        const StatedGap stated = kStatedGap.at(name);
        for (const std::pair<bp::CostModel, double>& costs_and_gap :
             {std::pair{share_costs(v), stated.unit},
              std::pair{share_costs(v, 1, 2, 1), stated.heavy_backward},
              std::pair{share_costs(v, 1, 2, 1, 0.1), stated.with_comm}}) {
          const bp::CostModel& costs = costs_and_gap.first;
          const double gap = costs_and_gap.second;
          CAPTURE(name);
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(costs.uniform.b);
          CAPTURE(costs.comm);
          const bp::Schedule s = bp::schedule_kind(name).needs_costs
                                     ? bp::make_schedule(name, p, m, v, costs)
                                     : bp::make_schedule(name, p, m, v);
          const double b = bound(s, costs), made = makespan(s, costs);
          CHECK(b <= made + 1e-9);
          CHECK(made <= b * (1 + gap / 100) + 1e-9);
        }
      }
}

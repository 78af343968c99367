// zb-h1, zb-h2 and zb-auto beside the zero-bubble authors' automatic scheduler (its heuristic,
// pipeline/schedule/generators/zero_bubble_heuristic.h) at f = 1, b = 2, w = 1 with and without
// a transfer cost: the authors' ZB-H1 is it at p micro-batches, their ZB-H2 at 2p. Brigade's
// are no slower and hold no more than the authors' shortest order. The heuristic itself is held
// to its own clock (the simulator times its orders as it does) and, at F = B = W, to the
// paper's ZB-H1 makespan.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/zero_bubble_heuristic.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

bp::CostModel costs(double f, double b, double w, double comm) {
  bp::CostModel c;
  c.uniform = {.f = f, .b = b, .w = w};
  c.comm = comm;
  return c;
}

int fullest(const bp::Simulation& sim) {
  int out = 0;
  for (const bp::DeviceStats& d : sim.stats.devices) out = std::max(out, d.peak_in_flight);
  return out;
}

struct Shortest {
  double makespan;
  int memory;  // the least any of the equally shortest orders holds
};

// The authors' shortest order at `max_mem` micro-batches per device, as initial_solution
// keeps it (of its eight settings), timed by the simulator.
Shortest authors(int p, int m, const bp::CostModel& c, int max_mem) {
  Shortest best{1e300, 0};
  for (const bp::Schedule& s :
       bp::zero_bubble_heuristic_orders(p, m, c, std::vector<int>(size_t(p), max_mem))) {
    const bp::Simulation sim = bp::simulate(s, c);
    if (sim.stats.makespan < best.makespan - 1e-9) best = {sim.stats.makespan, fullest(sim)};
    else if (sim.stats.makespan < best.makespan + 1e-9)
      best.memory = std::min(best.memory, fullest(sim));
  }
  return best;
}

void no_slower(const bp::Schedule& ours, const bp::CostModel& c, Shortest theirs) {
  CAPTURE(ours.name);
  bp::validate(ours);
  const bp::Simulation sim = bp::simulate(ours, c);
  CHECK(sim.stats.makespan <= theirs.makespan + 1e-9);
  CHECK(fullest(sim) <= theirs.memory);
}

}  // namespace

TEST_CASE("the zero-bubble heuristic's orders run as its own clock says, within memory") {
  for (double comm : {0.0, 0.1})
    for (int p : {2, 4, 8})
      for (int m : {p, 2 * p, 4 * p})
        for (int max_mem : {p, 2 * p})
          for (bool allow_bubble : {true, false})
            for (bool prioritize_b : {true, false})
              for (bool greedy : {true, false}) {
                CAPTURE(comm);
                CAPTURE(p);
                CAPTURE(m);
                CAPTURE(max_mem);
                CAPTURE(allow_bubble);
                CAPTURE(prioritize_b);
                CAPTURE(greedy);
                const bp::CostModel c = costs(1, 2, 1, comm);
                const auto order = bp::zero_bubble_heuristic(
                    p, m, c, std::vector<int>(size_t(p), max_mem),
                    {allow_bubble, prioritize_b, greedy});
                REQUIRE(order.has_value());
                CHECK_NOTHROW(bp::validate(order->schedule));
                const bp::Simulation sim = bp::simulate(order->schedule, c);
                CHECK(sim.stats.makespan == doctest::Approx(order->end));
                CHECK(fullest(sim) <= max_mem);
              }
}

TEST_CASE("the zero-bubble heuristic at F = B = W and p micro-batches is the paper's ZB-H1") {
  // The paper's ZB-H1 with no transfer cost: 3m + p - 1 units from the first F to the last W.
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      CAPTURE(p);
      CAPTURE(m);
      const Shortest h1 = authors(p, m, costs(1, 1, 1, 0), p);
      CHECK(h1.makespan == doctest::Approx(3.0 * m + p - 1));
      CHECK(h1.memory == p);
    }
}

TEST_CASE("zb-h1, zb-h2, zb-auto: as short as the authors' ZB-H1 and ZB-H2 at b = 2F, no more "
          "memory") {
  for (double comm : {0.0, 0.1})
    for (int p : {2, 4, 8})
      for (int m : {p, 2 * p, 4 * p}) {
        CAPTURE(comm);
        CAPTURE(p);
        CAPTURE(m);
        const bp::CostModel c = costs(1, 2, 1, comm);
        const Shortest h1 = authors(p, m, c, p), h2 = authors(p, m, c, 2 * p);
        no_slower(bp::make_schedule("zb-h1", p, m, 1, c), c, h1);
        no_slower(bp::make_schedule("zb-auto", p, m, 1, c), c, h1);
        no_slower(bp::make_schedule("zb-h2", p, m, 1, c), c, h2);
        no_slower(bp::make_schedule("zb-auto", p, m, 1, c, std::vector<int>(size_t(p), 2 * p)),
                  c, h2);
      }
}

TEST_CASE("zb-h1 and the heuristic refuse sizes they cannot serve, by name") {
  const bp::CostModel c = costs(1, 2, 1, 0.1);
  CHECK_THROWS_WITH_AS(bp::zb_h1(0, 4, c), "zb-h1: devices (p) must be at least 1, got 0",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::zero_bubble_heuristic(2, 4, c, {2}, {}),
                       "zero-bubble heuristic: 1 memory budgets for 2 devices",
                       std::invalid_argument);
}

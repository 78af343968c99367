// The schedules the zero-bubble papers and DualPipe add (zb-h2, interleaved-zb, zb-v, v-half,
// v-min, dualpipe-v) and the list scheduler most of them are: valid over a sweep of sizes,
// within their memory budgets, and as short as the papers say — checked against bounds and
// formulas computed here and against the older schedules, never against their own output.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/list_scheduler.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"
#include "tests/pipeline/schedule/accumulation_order.h"

namespace bp = brigade::pipeline;

namespace {

// F = B = W = 1 for a device's whole share of the model: a chunk of v costs 1/v.
bp::CostModel share_costs(int chunks) {
  bp::CostModel c;
  const double unit = 1.0 / chunks;
  c.uniform = {.f = unit, .b = unit, .w = unit};
  return c;
}

bp::Simulation run(const bp::Schedule& s) { return bp::simulate(s, share_costs(s.chunks)); }

// The most (stage, micro-batch) pairs any device holds from F start to W end.
int peak_chunks(const bp::Schedule& s) {
  int peak = 0;
  for (const bp::DeviceStats& d : run(s).stats.devices) peak = std::max(peak, d.peak_in_flight);
  return peak;
}

// Idle time summed over the devices, in units of one F of a device's share.
double idle(const bp::Schedule& s) {
  double total = 0;
  for (const bp::DeviceStats& d : run(s).stats.devices) total += d.idle;
  return total;
}

// The paper's measure (Qi et al.): a device's idle time between its own first and last action.
double idle_inside(const bp::Schedule& s, int device) {
  double first = 1e300, last = 0, busy = 0;
  for (const bp::TimelineEvent& e : run(s).timeline.events)
    if (e.device == device && e.lane == 0)
      first = std::min(first, e.start), last = std::max(last, e.end), busy += e.end - e.start;
  return last - first - busy;
}

}  // namespace

TEST_CASE("the new generators validate over a sweep of sizes and keep to their budgets") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 13; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      // Budgets in chunk-micro-batches per device (list_scheduler.h, v_shapes.cpp).
      const std::vector<std::pair<bp::Schedule, int>> zoo = {
          {bp::zb_h2(p, m), 2 * p - 1},
          {bp::interleaved_zb(p, m, 2), 2 * p},
          {bp::interleaved_zb(p, m, 3), 3 * p},
          {bp::zb_v(p, m), 2 * p},
          {bp::v_half(p, m), p + 2},
          {bp::v_min(p, m), 2 * ((p + 1) / 3) + 2},
      };
      for (const auto& schedule_and_budget : zoo) {
        const bp::Schedule& s = schedule_and_budget.first;
        const int budget = schedule_and_budget.second;
        CAPTURE(s.name);
        CHECK_NOTHROW(bp::validate(s));
        CHECK(peak_chunks(s) <= budget);
        CHECK(bp::test::accumulates_in_order(s));  // W's oldest first: parity bit for bit
      }
      if (m >= 2 * p) {
        const bp::Schedule d = bp::dualpipe_v(p, m);
        CHECK_NOTHROW(bp::validate(d));
        CHECK(peak_chunks(d) <= 2 * p + 1);  // DualPipe's p + 1 micro-batches, a chunk less
        CHECK(bp::test::accumulates_in_order(d));
      }
    }
}

TEST_CASE("the V shapes place stage d and 2p-1-d on device d") {
  for (const bp::Schedule& s : {bp::zb_v(3, 4), bp::v_half(3, 4), bp::v_min(3, 4),
                                bp::dualpipe_v(3, 6)}) {
    CAPTURE(s.name);
    CHECK(s.placement == bp::Placement::v_shape);
    CHECK(s.chunks == 2);
    for (int d = 0; d < 3; ++d) CHECK(s.stages_on(d) == std::vector<int>{d, 5 - d});
  }
}

TEST_CASE("dualpipe-v, p=2 m=4: the eight phases worked out by hand") {
  // Device 0 (stages 0 and 3): 2 F0; 1 x (F0 F1); 1 x (B1 W1 F1); 1 x (F0 B1 F1 B0);
  // 1 x (B1 F1 B0); B1 whole, then B0 split; 1 x (W B0); 1 x W.
  // Device 1 (stages 1 and 2): 2 x (F0 F1); 2 x (F0 B1 F1 B0); B1 B0 whole, then both split;
  // 2 x W.
  CHECK(bp::format_lists(bp::dualpipe_v(2, 4)) ==
        "d0: 0F0 0F1 0F2 3F0 3B0 3W0 3F1 0F3 3BW1 3F2 0BW0 3BW2 3F3 0BW1 3BW3 0B2 0W2 0B3 "
        "0W3\n"
        "d1: 1F0 2F0 1F1 2F1 1F2 2BW0 2F2 1BW0 1F3 2BW1 2F3 1BW1 2BW2 1BW2 2B3 1B3 2W3 1W3\n");
  CHECK_THROWS_WITH_AS(bp::dualpipe_v(4, 7),
                       "dualpipe-v: needs at least 2p = 8 micro-batches for 4 devices, got 7; "
                       "try m=8",
                       bp::MicrobatchCountError);
}

TEST_CASE("the papers' figures with F = B = W, at p=4 m=8 and p=8 m=16") {
  for (const std::pair<int, int>& p_m : {std::pair{4, 8}, std::pair{8, 16}}) {
    const int p = p_m.first, m = p_m.second;
    CAPTURE(p);
    CAPTURE(m);
    const double one_f_one_b = idle(bp::one_f_one_b(p, m));
    CHECK(one_f_one_b == doctest::Approx(p * 3.0 * (p - 1)));  // (p-1)(F+B+W) per device
    // The last device cannot start before p-1 chunk forwards of half a share, and then has
    // 3m shares of work: no schedule of two chunks ends before 3m + (p-1)/2.
    const double v_bound = 3.0 * m + (p - 1) / 2.0;
    // ZB-H2: zero bubble in the paper's measure, from each device's first action to its last.
    const bp::Schedule h2 = bp::zb_h2(p, m);
    for (int d = 0; d < p; ++d) CHECK(idle_inside(h2, d) == doctest::Approx(0));
    // The timeline's own count of that measure (timeline.h), against this file's, on 1F1B,
    // where it is not zero: device d starts d forwards (d) late and ends d backwards (2d)
    // early, so it idles 3(p-1) - 3d inside its span.
    const bp::Schedule plain = bp::one_f_one_b(p, m);
    for (int d = 0; d < p; ++d) {
      CHECK(idle_inside(plain, d) == doctest::Approx(3.0 * (p - 1 - d)));
      CHECK(run(plain).stats.devices[d].idle_inside == doctest::Approx(idle_inside(plain, d)));
    }
    // ZB-V: next to no bubble at 1F1B's memory (2p chunks = p shares); DualPipeV as short.
    CHECK(run(bp::zb_v(p, m)).stats.makespan <= v_bound * 1.04);
    if (p == 4) CHECK(run(bp::zb_v(p, m)).stats.makespan == doctest::Approx(v_bound));
    CHECK(run(bp::dualpipe_v(p, m)).stats.makespan == doctest::Approx(v_bound));
    // V-Half: about half of 1F1B's bubble at p/2 + 1 shares; V-Min: no more bubble than 1F1B
    // at about p/3 + 1 (the paper's building block's memory, 2 floor((p + 1) / 3) + 2 chunks).
    CHECK(idle(bp::v_half(p, m)) <= 0.6 * one_f_one_b);
    CHECK(peak_chunks(bp::v_half(p, m)) <= p + 2);
    CHECK(idle(bp::v_min(p, m)) <= one_f_one_b);
    CHECK(peak_chunks(bp::v_min(p, m)) <= 2 * ((p + 1) / 3) + 2);
    // Interleaved zero bubble: less bubble than interleaved 1F1B, at 1F1B's memory.
    CHECK(idle(bp::interleaved_zb(p, m, 2)) < idle(bp::interleaved_1f1b(p, m, 2)));
    CHECK(peak_chunks(bp::interleaved_zb(p, m, 2)) <= 2 * p);
  }
}

TEST_CASE("the list scheduler: the tightest budget never stalls, and a smaller one is refused") {
  for (const bp::Placement placement : {bp::Placement::looped, bp::Placement::v_shape})
    for (int p = 1; p <= 5; ++p)
      for (int v = 1; v <= 3; ++v)
        for (int m = 1; m <= 9; m += 2) {
          CAPTURE(p);
          CAPTURE(v);
          CAPTURE(m);
          const bp::ListProblem problem{.name = "tight", .devices = p, .microbatches = m,
                                        .chunks = v, .placement = placement, .budget = v,
                                        .costs = {}};
          const bp::Schedule s = bp::shortest_list_schedule(problem);
          CHECK_NOTHROW(bp::validate(s));
          CHECK(peak_chunks(s) <= v);  // one micro-batch at a time on every device
        }
  CHECK_THROWS_WITH_AS(
      bp::list_schedule({.name = "zb-v", .devices = 4, .microbatches = 8, .chunks = 2,
                         .placement = bp::Placement::v_shape, .budget = 1, .costs = {}},
                        {}),
      "zb-v: a budget of 1 chunk-micro-batches on device 0 cannot hold one micro-batch's 2 "
      "chunks; give at least 2",
      std::invalid_argument);
}

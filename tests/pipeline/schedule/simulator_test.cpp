// The simulator against the literature's closed forms (unit costs) and against small cases
// worked out by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

bp::CostModel unit_costs() { return bp::CostModel{}; }  // F = B = W = 1, comm = 0

}  // namespace

TEST_CASE("GPipe and 1F1B: bubble (p-1)/(m+p-1), makespan (m+p-1)(F+B+W)") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const double bubble = double(p - 1) / (m + p - 1);
      for (const bp::Schedule& s : {bp::gpipe(p, m), bp::one_f_one_b(p, m)}) {
        CAPTURE(s.name);
        const bp::Simulation sim = bp::simulate(s, unit_costs());
        CHECK(sim.stats.makespan == doctest::Approx(3.0 * (m + p - 1)));
        CHECK(sim.stats.bubble_fraction == doctest::Approx(bubble));
        for (const bp::DeviceStats& d : sim.stats.devices) CHECK(d.busy == doctest::Approx(3 * m));
      }
    }
}

TEST_CASE("interleaved 1F1B: bubble (p-1)/(v·m+p-1)") {
  for (int p = 1; p <= 5; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        CAPTURE(p);
        CAPTURE(v);
        CAPTURE(m);
        const bp::Simulation sim = bp::simulate(bp::interleaved_1f1b(p, m, v), unit_costs());
        CHECK(sim.stats.bubble_fraction == doctest::Approx(double(p - 1) / (v * m + p - 1)));
      }
}

TEST_CASE("looped BFS: interleaved's bubble (p-1)/(v·m+p-1) for any m >= p, GPipe's memory") {
  // Unit costs per stage (F = 1, BW = 2): device d's forwards end at d + vm, its backwards
  // start a chain of 2(p-1-d) behind the last stage's, and it works 3vm in all: makespan
  // 3vm + 3(p-1) (m >= p keeps each chunk's wait for the previous chunk's last device hidden).
  for (int p = 1; p <= 5; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = p; m <= 3 * p + 1; ++m) {
        CAPTURE(p);
        CAPTURE(v);
        CAPTURE(m);
        const bp::Simulation sim = bp::simulate(bp::looped_bfs(p, m, v), unit_costs());
        CHECK(sim.stats.makespan == doctest::Approx(3.0 * v * m + 3.0 * (p - 1)));
        CHECK(sim.stats.bubble_fraction == doctest::Approx(double(p - 1) / (v * m + p - 1)));
        for (const bp::DeviceStats& d : sim.stats.devices) CHECK(d.peak_in_flight == m * v);
      }
}

TEST_CASE("ZB-H1 idles at most a third of 1F1B when F = B = W") {
  // The paper's bubbles: (p-1)(F+B-W) = p-1 against 1F1B's (p-1)(F+B+W) = 3(p-1).
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 3 * p; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const bp::Simulation zb = bp::simulate(bp::zb_h1(p, m), unit_costs());
      const bp::Simulation ob = bp::simulate(bp::one_f_one_b(p, m), unit_costs());
      for (int d = 0; d < p; ++d) {
        CAPTURE(d);
        CHECK(ob.stats.devices[d].idle == doctest::Approx(3.0 * (p - 1)));
        CHECK(zb.stats.devices[d].idle <= ob.stats.devices[d].idle / 3 + 1e-9);
      }
      CHECK(zb.stats.makespan == doctest::Approx(3.0 * m + (p - 1)));
    }
}

TEST_CASE("peak in-flight micro-batches: 1F1B min(p-s, m) on stage s, GPipe m, ZB-H1 min(p, m)") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 10; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const auto ob = bp::simulate(bp::one_f_one_b(p, m), unit_costs()).stats;
      const auto gp = bp::simulate(bp::gpipe(p, m), unit_costs()).stats;
      const auto zb = bp::simulate(bp::zb_h1(p, m), unit_costs()).stats;
      for (int s = 0; s < p; ++s) {
        CAPTURE(s);
        CHECK(ob.devices[s].peak_in_flight == std::min(p - s, m));
        CHECK(gp.devices[s].peak_in_flight == m);
        // ZB-H1 keeps 1F1B's worst device's memory (p) on every device.
        CHECK(zb.devices[s].peak_in_flight == std::min(p, m));
      }
    }
}

TEST_CASE("naive: one device busy at a time, one micro-batch in flight") {
  const int p = 4, m = 8;
  const bp::Simulation sim = bp::simulate(bp::naive(p, m), unit_costs());
  // m micro-batches in a row, each through p stages down (F) and up (B + W): 3·m·p.
  CHECK(sim.stats.makespan == doctest::Approx(3.0 * m * p));
  CHECK(sim.stats.bubble_fraction == doctest::Approx(double(p - 1) / p));
  for (const auto& d : sim.stats.devices) {
    CHECK(d.peak_in_flight == 1);
    CHECK(d.peak_activation_bytes == doctest::Approx(1));  // one micro-batch's activations
  }
  // The mini-batch uncut (m = 1) with each action m times as dear: the same time, m times the
  // memory.
  bp::CostModel whole;
  whole.stages.assign(p, {.f = m, .b = m, .w = m, .activation_bytes = m});
  const bp::Simulation one = bp::simulate(bp::naive(p, 1), whole);
  CHECK(one.stats.makespan == doctest::Approx(sim.stats.makespan));
  CHECK(one.stats.devices[0].peak_activation_bytes == doctest::Approx(m));
}

TEST_CASE("per-stage costs, transfer cost and activation bytes, worked by hand") {
  // GPipe, p = 2, m = 2. Stage 0: F 1, B 2, W 0, 10 bytes. Stage 1: F 3, B 1, W 1, 100 bytes.
  // comm 0.5 between the devices.
  //   d0: 0F0 [0,1]   0F1 [1,2]                          0BW0 [10,12] 0BW1 [12,14]
  //   d1: 1F0 [1.5,4.5] 1F1 [4.5,7.5] 1BW0 [7.5,9.5] 1BW1 [9.5,11.5]
  // 0BW0 waits for 1BW0's end 9.5 + 0.5; 0BW1 for 11.5 + 0.5 and for the device (12).
  bp::CostModel costs;
  costs.stages = {{1, 2, 0, 10}, {3, 1, 1, 100}};
  costs.comm = 0.5;
  const bp::Simulation sim = bp::simulate(bp::gpipe(2, 2), costs);
  CHECK(sim.stats.makespan == doctest::Approx(14));
  CHECK(sim.stats.devices[0].busy == doctest::Approx(6));
  CHECK(sim.stats.devices[1].busy == doctest::Approx(10));
  CHECK(sim.stats.bubble_fraction == doctest::Approx(12.0 / 28));
  CHECK(sim.stats.devices[0].peak_activation_bytes == doctest::Approx(20));
  CHECK(sim.stats.devices[1].peak_activation_bytes == doctest::Approx(200));
  const std::vector<std::pair<std::string, double>> d1 = {
      {"1F0", 1.5}, {"1F1", 4.5}, {"1BW0", 7.5}, {"1BW1", 9.5}};
  int i = 0;
  for (const bp::TimelineEvent& e : sim.timeline.events)
    if (e.device == 1) {
      REQUIRE(i < 4);
      CHECK(bp::to_string(e.action) == d1[i].first);
      CHECK(e.start == doctest::Approx(d1[i].second));
      ++i;
    }
  CHECK(i == 4);
}

TEST_CASE("measured action costs override the stage costs") {
  bp::CostModel costs;
  costs.measured[{1, bp::Op::BW, 0}] = 7;  // one slow backward on the last stage
  const bp::Simulation sim = bp::simulate(bp::gpipe(2, 1), costs);
  // 0F0 [0,1], 1F0 [1,2], 1BW0 [2,9], 0BW0 [9,11]
  CHECK(sim.stats.makespan == doctest::Approx(11));
}

TEST_CASE("a fused backward costs `bw` when the cost model sets it, B + W when not") {
  bp::CostModel costs;
  costs.stages = {{1, 2, 3, 1, 4}, {1, 2, 3, 1}};  // stage 0 fuses cheaper: 4 < 2 + 3
  // 1F1B, p = 2, m = 1: 0F0 [0,1], 1F0 [1,2], 1BW0 [2,7] (B + W), 0BW0 [7,11] (bw).
  CHECK(bp::simulate(bp::one_f_one_b(2, 1), costs).stats.makespan == doctest::Approx(11));
  // Split, each half costs its own: 1B0 [2,4], 0B0 [4,6], 0W0 [6,9] (and 1W0 [4,7]).
  CHECK(bp::simulate(bp::zb_h1(2, 1), costs).stats.makespan == doctest::Approx(9));
}

TEST_CASE("per-stage medians of measured timelines: F from all, B and W from split, BW fused") {
  bp::Timeline fused, split;
  fused.events = {{0, 0, {0, bp::Op::F, 0}, 0, 2},   {0, 0, {0, bp::Op::F, 1}, 2, 6},
                  {0, 0, {0, bp::Op::BW, 0}, 6, 11}, {1, 1, {0, bp::Op::F, 0}, 2, 3}};
  split.events = {{0, 0, {0, bp::Op::F, 0}, 0, 3}, {0, 0, {0, bp::Op::B, 0}, 3, 5},
                  {0, 0, {0, bp::Op::W, 0}, 5, 9}, {1, 0, {1, bp::Op::F, 0}, 3, 4},
                  {0, 1, {0, bp::Op::F, 0}, 3, 6},   // lane 1: a transfer, 3
                  {0, 0, {0, bp::Op::F, 1}, 9, 29}};  // stage 0 lost its core: 20
  const bp::CostModel c = bp::median_stage_costs({&fused, &split}, 2);
  REQUIRE(c.stages.size() == 2);
  CHECK(c.stages[0].f == doctest::Approx(3.5));  // 2 3 | 4 20: (3 + 4) / 2, not the mean 7.25
  CHECK(c.stages[0].b == doctest::Approx(2));
  CHECK(c.stages[0].w == doctest::Approx(4));
  REQUIRE(c.stages[0].bw.has_value());
  CHECK(*c.stages[0].bw == doctest::Approx(5));
  CHECK(c.stages[1].f == doctest::Approx(1));
  CHECK_FALSE(c.stages[1].bw.has_value());  // no fused backward measured: B + W
  CHECK(c.comm == doctest::Approx(2));      // 1 3: (1 + 3) / 2
  CHECK_THROWS_WITH_AS(bp::median_stage_costs({&split}, 1),
                       "median_stage_costs: 1F0 is outside the 1 stages", std::invalid_argument);
}

// Random uneven stages: F, B, W in [0.2, 2], a fused backward from 30 % cheaper to 10 % dearer
// than B + W, transfers up to 0.5.
bp::CostModel random_costs(std::mt19937& rng, int p) {
  std::uniform_real_distribution<double> cost(0.2, 2.0), fuse(0.7, 1.1), comm(0.0, 0.5);
  bp::CostModel c;
  c.comm = comm(rng);
  for (int st = 0; st < p; ++st) {
    bp::StageCost s{cost(rng), cost(rng), cost(rng), 1};
    s.bw = (s.b + s.w) * fuse(rng);
    c.stages.push_back(s);
  }
  return c;
}

TEST_CASE("zb-auto over random costs: valid, never slower than 1f1b and zb-h1, p in flight") {
  std::mt19937 rng(20240229);
  int trials = 0, strictly_faster = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int p = 1 + trial % 5, m = 1 + (trial * 7) % 13;
    const bp::CostModel costs = random_costs(rng, p);
    CAPTURE(trial);
    CAPTURE(p);
    CAPTURE(m);
    const bp::Schedule s = bp::zb_auto(p, m, costs);
    CAPTURE(bp::format_lists(s));
    REQUIRE_NOTHROW(bp::validate(s));
    const bp::Simulation sim = bp::simulate(s, costs);
    const double hand_made = std::min(bp::simulate(bp::one_f_one_b(p, m), costs).stats.makespan,
                                      bp::simulate(bp::zb_h1(p, m), costs).stats.makespan);
    CHECK(sim.stats.makespan <= hand_made + 1e-9);
    if (p > 1) ++trials, strictly_faster += sim.stats.makespan < hand_made * (1 - 1e-9);
    for (int d = 0; d < p; ++d) {
      CHECK(sim.stats.devices[d].peak_in_flight <= p);
      // Weight gradients accumulate in micro-batch order (W or BW), as in 1F1B.
      int last = -1;
      for (const bp::Action& a : s.lists[d])
        if (a.op == bp::Op::W || a.op == bp::Op::BW) CHECK(a.microbatch == ++last);
    }
  }
  // The list scheduler earns its place: on most uneven costs it beats both hand-made
  // schedules (150 of the 240 multi-device trials, 3 % shorter on average, when written).
  CHECK(strictly_faster * 2 > trials);
}

TEST_CASE("zb-auto under a tighter memory limit keeps to it") {
  std::mt19937 rng(7);
  for (int limit = 1; limit <= 3; ++limit)
    for (int p = 2; p <= 4; ++p) {
      CAPTURE(limit);
      CAPTURE(p);
      const bp::CostModel costs = random_costs(rng, p);
      const bp::Schedule s = bp::zb_auto(p, 9, costs, limit);
      REQUIRE_NOTHROW(bp::validate(s));
      for (const bp::DeviceStats& d : bp::simulate(s, costs).stats.devices)
        CHECK(d.peak_in_flight <= limit);
    }
}

TEST_CASE("zb-auto with a memory limit per device keeps each device to its own") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int p = 2 + trial % 3;
    std::vector<int> limits;
    for (int d = 0; d < p; ++d) limits.push_back(1 + static_cast<int>(rng() % 4));
    CAPTURE(trial);
    CAPTURE(p);
    CAPTURE(limits[0]);
    CAPTURE(limits[1]);
    const bp::CostModel costs = random_costs(rng, p);
    const bp::Schedule s = bp::zb_auto(p, 9, costs, limits);
    CAPTURE(bp::format_lists(s));
    REQUIRE_NOTHROW(bp::validate(s));
    const bp::Simulation sim = bp::simulate(s, costs);
    for (int d = 0; d < p; ++d) CHECK(sim.stats.devices[d].peak_in_flight <= limits[d]);
  }
  CHECK_THROWS_WITH_AS(bp::zb_auto(2, 4, bp::CostModel{}, std::vector<int>{2}),
                       "zb-auto: 1 in-flight bounds for 2 devices", std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::zb_auto(2, 4, bp::CostModel{}, std::vector<int>{2, 0}),
                       "zb-auto: max in-flight micro-batches must be at least 1, got 0 on device 1",
                       std::invalid_argument);
}

TEST_CASE("a schedule that cannot progress is reported, not looped on") {
  const bp::Schedule s =
      bp::parse_schedule("d0: 0F0 0BW0 0F1 0BW1\nd1: 1F0 1F1 1BW0 1BW1\n", 1, 2, "stuck");
  CHECK_THROWS_WITH_AS(bp::simulate(s, unit_costs()),
                       "simulate 'stuck': not progressing: device 0 waits at 0BW0 for 1B0; "
                       "device 1 waits at 1F1 for 0F1",
                       bp::ScheduleError);
  bp::CostModel wrong;
  wrong.stages.resize(3);
  CHECK_THROWS_WITH_AS(bp::simulate(bp::gpipe(2, 2), wrong),
                       "simulate 'gpipe': the cost model has 3 stage costs for 2 stages",
                       std::invalid_argument);
}

// Generators: exact lists for small cases, written out by hand from the papers' pictures
// (not printed by the code under test), and validity over a sweep of sizes.
#include <doctest/doctest.h>

#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

TEST_CASE("naive: each micro-batch down and back up before the next, m honoured") {
  const bp::Schedule s = bp::naive(2, 3);
  CHECK(bp::format_lists(s) ==
        "d0: 0F0 0BW0 0F1 0BW1 0F2 0BW2\n"
        "d1: 1F0 1BW0 1F1 1BW1 1F2 1BW2\n");
  CHECK(s.microbatches == 3);
  CHECK(s.batch_units == 1);
  // With two chunks per device each micro-batch visits device 0 twice on each pass.
  CHECK(bp::format_lists(bp::naive(2, 1, 2)) ==
        "d0: 0F0 2F0 2BW0 0BW0\n"
        "d1: 1F0 3F0 3BW0 1BW0\n");
  // make_schedule passes m through: `--schedule naive --microbatches 4` runs 4.
  CHECK(bp::make_schedule("naive", 2, 4).microbatches == 4);
}

TEST_CASE("gpipe, p=2 m=3 and p=4 m=4") {
  CHECK(bp::format_lists(bp::gpipe(2, 3)) ==
        "d0: 0F0 0F1 0F2 0BW0 0BW1 0BW2\n"
        "d1: 1F0 1F1 1F2 1BW0 1BW1 1BW2\n");
  CHECK(bp::format_lists(bp::gpipe(4, 4)) ==
        "d0: 0F0 0F1 0F2 0F3 0BW0 0BW1 0BW2 0BW3\n"
        "d1: 1F0 1F1 1F2 1F3 1BW0 1BW1 1BW2 1BW3\n"
        "d2: 2F0 2F1 2F2 2F3 2BW0 2BW1 2BW2 2BW3\n"
        "d3: 3F0 3F1 3F2 3F3 3BW0 3BW1 3BW2 3BW3\n");
}

TEST_CASE("1f1b, p=2 m=3 and p=4 m=4: warm-up p-1-d forwards, then alternate") {
  CHECK(bp::format_lists(bp::one_f_one_b(2, 3)) ==
        "d0: 0F0 0F1 0BW0 0F2 0BW1 0BW2\n"
        "d1: 1F0 1BW0 1F1 1BW1 1F2 1BW2\n");
  CHECK(bp::format_lists(bp::one_f_one_b(4, 4)) ==
        "d0: 0F0 0F1 0F2 0F3 0BW0 0BW1 0BW2 0BW3\n"
        "d1: 1F0 1F1 1F2 1BW0 1F3 1BW1 1BW2 1BW3\n"
        "d2: 2F0 2F1 2BW0 2F2 2BW1 2F3 2BW2 2BW3\n"
        "d3: 3F0 3BW0 3F1 3BW1 3F2 3BW2 3F3 3BW3\n");
  // m < p: the warm-up is cut short.
  CHECK(bp::format_lists(bp::one_f_one_b(4, 2)) ==
        "d0: 0F0 0F1 0BW0 0BW1\n"
        "d1: 1F0 1F1 1BW0 1BW1\n"
        "d2: 2F0 2F1 2BW0 2BW1\n"
        "d3: 3F0 3BW0 3F1 3BW1\n");
}

TEST_CASE("zb-h1, p=2 m=3 and p=4 m=4: device d postpones its first d W's to the end") {
  CHECK(bp::format_lists(bp::zb_h1(2, 3)) ==
        "d0: 0F0 0F1 0B0 0W0 0F2 0B1 0W1 0B2 0W2\n"
        "d1: 1F0 1B0 1F1 1B1 1W0 1F2 1B2 1W1 1W2\n");
  CHECK(bp::format_lists(bp::zb_h1(4, 4)) ==
        "d0: 0F0 0F1 0F2 0F3 0B0 0W0 0B1 0W1 0B2 0W2 0B3 0W3\n"
        "d1: 1F0 1F1 1F2 1B0 1F3 1B1 1W0 1B2 1W1 1B3 1W2 1W3\n"
        "d2: 2F0 2F1 2B0 2F2 2B1 2F3 2B2 2W0 2B3 2W1 2W2 2W3\n"
        "d3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3W0 3W1 3W2 3W3\n");
}

TEST_CASE("zb-auto, p=2 m=3 on uneven stages: the bottleneck keeps BW fused, the other splits") {
  // Stage 0: F = B = W = 1, BW = 1.5 (fused is cheaper than split); stage 1 half of that.
  // Device 0 holds at most p = 2 micro-batches. Worked by hand, the best order keeps device 0
  // busy from 0 to 7.5 = 3·F + 3·BW, its own work:
  //   d0: 0F0 [0,1] 0F1 [1,2] 0BW0 [2,3.5] 0F2 [3.5,4.5] 0BW1 [4.5,6] 0BW2 [6,7.5]
  //   d1: 1F0 [1,1.5] 1B0 [1.5,2] 1F1 [2,2.5] 1B1 [2.5,3] 1W0 1W1 [3,4] 1F2 [4.5,5] 1BW2
  // Device 1 splits 1B0 so that 0BW0 starts at 2, not 2.25. Its last backward ends by 6 either
  // way; fused it is shorter, and so is the step if a transfer costs time (the tie-break). 1F1B (fused everywhere) waits
  // for 1BW0 until 2.25 and ends at 7.75; ZB-H1 splits device 0's backwards too: 3 + 6 = 9.
  bp::CostModel costs;
  costs.stages = {{1, 1, 1, 1, 1.5}, {0.5, 0.5, 0.5, 1, 0.75}};
  const bp::Schedule s = bp::zb_auto(2, 3, costs);
  CHECK(bp::format_lists(s) ==
        "d0: 0F0 0F1 0BW0 0F2 0BW1 0BW2\n"
        "d1: 1F0 1B0 1F1 1B1 1W0 1W1 1F2 1BW2\n");
  CHECK(s.name == "zb-auto");
  CHECK(bp::simulate(s, costs).stats.makespan == doctest::Approx(7.5));
  CHECK(bp::simulate(bp::one_f_one_b(2, 3), costs).stats.makespan == doctest::Approx(7.75));
  CHECK(bp::simulate(bp::zb_h1(2, 3), costs).stats.makespan == doctest::Approx(9));
  // The registry passes the costs through.
  CHECK(bp::format_lists(bp::make_schedule("zb-auto", 2, 3, 1, costs)) == bp::format_lists(s));
}

TEST_CASE("zb-auto with F = B = W everywhere is as short as ZB-H1: 3m + p - 1") {
  for (int p = 1; p <= 5; ++p)
    for (int m = p; m <= 3 * p; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      CHECK(bp::simulate(bp::zb_auto(p, m, bp::CostModel{}), bp::CostModel{}).stats.makespan ==
            doctest::Approx(3.0 * m + p - 1));
    }
}

TEST_CASE("interleaved-1f1b, p=2 m=2 v=2 and p=4 m=4 v=2") {
  // Stages 0, 1 are chunk 0 of devices 0, 1; stages 2, 3 are their chunk 1.
  CHECK(bp::format_lists(bp::interleaved_1f1b(2, 2, 2)) ==
        "d0: 0F0 0F1 2F0 2F1 2BW0 2BW1 0BW0 0BW1\n"
        "d1: 1F0 1F1 3F0 3BW0 3F1 3BW1 1BW0 1BW1\n");
  // Warm-up (p-1-d)·2 + (v-1)·p = 10, 8, 6, 4 forwards, capped at m·v = 8.
  CHECK(bp::format_lists(bp::interleaved_1f1b(4, 4, 2)) ==
        "d0: 0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 4BW0 4BW1 4BW2 4BW3 0BW0 0BW1 0BW2 0BW3\n"
        "d1: 1F0 1F1 1F2 1F3 5F0 5F1 5F2 5F3 5BW0 5BW1 5BW2 5BW3 1BW0 1BW1 1BW2 1BW3\n"
        "d2: 2F0 2F1 2F2 2F3 6F0 6F1 6F2 6BW0 6F3 6BW1 6BW2 6BW3 2BW0 2BW1 2BW2 2BW3\n"
        "d3: 3F0 3F1 3F2 3F3 7F0 7BW0 7F1 7BW1 7F2 7BW2 7F3 7BW3 3BW0 3BW1 3BW2 3BW3\n");
}

TEST_CASE("looped-bfs, p=2 m=3 v=2: every micro-batch through chunk 0, then chunk 1, then back") {
  // Stages 0, 1 are chunk 0 of devices 0, 1; stages 2, 3 their chunk 1. Backwards in
  // micro-batch order within a chunk, the chunks reversed.
  CHECK(bp::format_lists(bp::looped_bfs(2, 3, 2)) ==
        "d0: 0F0 0F1 0F2 2F0 2F1 2F2 2BW0 2BW1 2BW2 0BW0 0BW1 0BW2\n"
        "d1: 1F0 1F1 1F2 3F0 3F1 3F2 3BW0 3BW1 3BW2 1BW0 1BW1 1BW2\n");
  CHECK(bp::default_chunks("looped-bfs") == 2);
  CHECK(bp::default_chunks("interleaved-1f1b") == 2);
  CHECK(bp::default_chunks("1f1b") == 1);
}

TEST_CASE("every generator's schedule validates over a sweep of sizes") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 13; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      CHECK_NOTHROW(bp::validate(bp::naive(p, m)));
      CHECK_NOTHROW(bp::validate(bp::naive(p, m, 3)));
      CHECK_NOTHROW(bp::validate(bp::gpipe(p, m)));
      CHECK_NOTHROW(bp::validate(bp::one_f_one_b(p, m)));
      CHECK_NOTHROW(bp::validate(bp::zb_h1(p, m)));
      CHECK_NOTHROW(bp::validate(bp::zb_auto(p, m, bp::CostModel{})));
      CHECK_NOTHROW(bp::validate(bp::zb_auto(p, m, bp::CostModel{}, 1)));
      for (int v = 1; v <= 4; ++v) CHECK_NOTHROW(bp::validate(bp::looped_bfs(p, m, v)));
      if (m % p == 0)
        for (int v = 1; v <= 4; ++v) {
          CAPTURE(v);
          CHECK_NOTHROW(bp::validate(bp::interleaved_1f1b(p, m, v)));
        }
    }
}

// A refusal of the count is a MicrobatchCountError (a tool that chose the count says where it
// came from); of anything else, a plain std::invalid_argument.
TEST_CASE("sizes a generator cannot serve are refused with the values that work") {
  CHECK_THROWS_WITH_AS(bp::interleaved_1f1b(4, 6, 2),
                       "interleaved-1f1b: micro-batches must be a multiple of the devices (p=4), "
                       "got m=6; try m=4 or m=8",
                       bp::MicrobatchCountError);
  CHECK_THROWS_WITH_AS(bp::interleaved_1f1b(4, 3, 2),
                       doctest::Contains("got m=3; try m=4"), bp::MicrobatchCountError);
  CHECK_THROWS_WITH_AS(bp::gpipe(4, 0), "gpipe: micro-batches (m) must be at least 1, got 0",
                       bp::MicrobatchCountError);
  CHECK_THROWS_WITH_AS(bp::gpipe(0, 4), "gpipe: devices (p) must be at least 1, got 0",
                       std::invalid_argument);
  try {
    bp::gpipe(0, 4);
  } catch (const bp::MicrobatchCountError&) {
    FAIL("a refusal of the devices is not one of the count");
  } catch (const std::invalid_argument&) {  // the plain refusal, as it should be
  }
  CHECK_THROWS_WITH_AS(bp::make_schedule("1f1b", 4, 8, 2),
                       doctest::Contains("1f1b places one stage per device, so it needs chunks=1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::make_schedule("pipedream", 4, 8),
                       "unknown schedule 'pipedream'; known: naive gpipe 1f1b interleaved-1f1b "
                       "looped-bfs zb-h1 zb-h2 zb-auto interleaved-zb zb-v v-half v-min "
                       "dualpipe-v",
                       std::invalid_argument);
  bp::CostModel three;
  three.stages.resize(3);
  CHECK_THROWS_WITH_AS(bp::zb_auto(2, 4, three),
                       "zb-auto: the cost model has 3 stage costs for 2 devices (one stage per "
                       "device)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::zb_auto(2, 4, bp::CostModel{}, -1),
                       "zb-auto: max in-flight micro-batches must be at least 1, got -1",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::make_schedule("zb-auto", 2, 4, 2),
                       doctest::Contains("zb-auto places one stage per device"),
                       std::invalid_argument);
}

TEST_CASE("the registry builds every schedule it names, placed as placement_of says") {
  for (const std::string& name : bp::schedule_names()) {
    CAPTURE(name);
    const bp::Schedule s = bp::make_schedule(name, 4, 8, bp::default_chunks(name));
    CHECK(s.name == name);
    CHECK(s.placement == bp::placement_of(name));
    CHECK_NOTHROW(bp::validate(s));
  }
  CHECK_THROWS_WITH_AS(bp::make_schedule("zb-v", 4, 8, 3),
                       "zb-v places two stages per device in a V, so it needs chunks=2 (got 3)",
                       std::invalid_argument);
}

TEST_CASE("the registry is one table: every name once, its chunks and costs as it says") {
  const std::vector<std::string> names = {"naive",  "gpipe",        "1f1b",    "interleaved-1f1b",
                                          "looped-bfs", "zb-h1",    "zb-h2",   "zb-auto",
                                          "interleaved-zb", "zb-v", "v-half",  "v-min",
                                          "dualpipe-v"};
  for (const std::string& name : names) CHECK(bp::schedule_kind(name).name == name);
  CHECK(bp::schedule_names().size() == bp::schedule_kinds().size());
  CHECK_THROWS_AS(bp::schedule_kind("1f2b"), std::invalid_argument);
  // Uneven costs: a schedule planned for costs orders stage 1's work otherwise than for
  // uniform ones; every other schedule is the same whatever the costs.
  bp::CostModel uneven;
  for (double f : {1.0, 6.0, 1.0, 1.0}) uneven.stages.push_back({.f = f, .b = f, .w = f / 4});
  for (const bp::ScheduleKind& k : bp::schedule_kinds()) {
    CAPTURE(k.name);
    const int v = k.default_chunks;
    if (k.chunks == bp::Chunks::one) CHECK(v == 1);
    if (k.chunks == bp::Chunks::two) CHECK(v == 2);
    if (k.chunks != bp::Chunks::any)
      CHECK_THROWS_AS(bp::make_schedule(k.name, 4, 8, 3 - v), std::invalid_argument);
    const bp::Schedule plain = bp::make_schedule(k.name, 4, 8, v);
    CHECK(plain.placement == k.placement);
    if (!k.needs_costs)
      CHECK(bp::format_lists(bp::make_schedule(k.name, 4, 8, v, uneven)) ==
            bp::format_lists(plain));
  }
  CHECK(bp::format_lists(bp::make_schedule("zb-auto", 4, 8, 1, uneven)) !=
        bp::format_lists(bp::make_schedule("zb-auto", 4, 8, 1)));
}

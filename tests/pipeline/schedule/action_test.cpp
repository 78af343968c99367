// The text form of actions and schedules, and the dependency rules of action.h.
#include <doctest/doctest.h>

#include <stdexcept>

#include "pipeline/schedule/action.h"
#include "pipeline/schedule/schedule.h"

namespace bp = brigade::pipeline;
using bp::Action;
using bp::Op;

TEST_CASE("action text form prints and parses back") {
  for (Op op : {Op::F, Op::B, Op::W, Op::BW})
    for (int stage : {0, 1, 12})
      for (int mb : {0, 3, 107}) {
        const Action a{stage, op, mb};
        CHECK(bp::parse_action(bp::to_string(a)) == a);
      }
  CHECK(bp::to_string(Action{1, Op::F, 3}) == "1F3");
  CHECK(bp::to_string(Action{0, Op::BW, 2}) == "0BW2");
  CHECK(bp::parse_action("12W40") == Action{12, Op::W, 40});
}

TEST_CASE("malformed actions are rejected with the text in the message") {
  for (const char* bad : {"", "F3", "1F", "1X3", "1F3x", "1f3", "-1F3", "1 F3"}) {
    CAPTURE(bad);
    try {
      bp::parse_action(bad);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("'" + std::string(bad) + "'") != std::string::npos);
    }
  }
}

TEST_CASE("dependencies: F waits for the previous F, B for the next B, W for its B") {
  using bp::Phase;
  auto text = [](const std::vector<bp::Need>& needs) {
    std::string out;
    for (const auto& n : needs) out += bp::to_string(n) + " ";
    return out;
  };
  const int stages = 4;
  CHECK(text(bp::needs({0, Op::F, 5}, stages)) == "");
  CHECK(text(bp::needs({2, Op::F, 5}, stages)) == "1F5 ");
  CHECK(text(bp::needs({2, Op::B, 5}, stages)) == "2F5 3B5 ");
  CHECK(text(bp::needs({2, Op::BW, 5}, stages)) == "2F5 3B5 ");
  CHECK(text(bp::needs({3, Op::B, 5}, stages)) == "3F5 ");  // the last stage has the loss
  CHECK(text(bp::needs({1, Op::W, 5}, stages)) == "1B5 ");
  CHECK(bp::completes(Op::BW) == std::vector<Phase>{Phase::InputGrad, Phase::WeightGrad});
}

TEST_CASE("schedule text form round-trips and names bad lines") {
  const char* text =
      "# p = 2, m = 1\n"
      "d0: 0F0 0BW0\n"
      "\n"
      "d1: 1F0 1BW0\n";
  const bp::Schedule s = bp::parse_schedule(text, 1, 1);
  CHECK(s.devices == 2);
  CHECK(bp::format_lists(s) == "d0: 0F0 0BW0\nd1: 1F0 1BW0\n");
  CHECK(bp::parse_schedule(bp::format_lists(s), 1, 1).lists == s.lists);
  CHECK_THROWS_WITH_AS(bp::parse_schedule("d1: 1F0\n", 1, 1),
                       "schedule line 1: expected 'd0:' at the start, got 'd1:'",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bp::parse_schedule("d0: 0F0 0Q0\n", 1, 1),
                       doctest::Contains("schedule line 1: action '0Q0'"),
                       std::invalid_argument);
}

TEST_CASE("placement: stage s lives on device s mod p") {
  bp::Schedule s;
  s.devices = 2;
  s.chunks = 2;
  CHECK(s.stages() == 4);
  CHECK(s.stages_on(0) == std::vector<int>{0, 2});
  CHECK(s.stages_on(1) == std::vector<int>{1, 3});
  CHECK(bp::format_placement(s) == "stage -> device: 0->d0 1->d1 2->d0 3->d1");
}

TEST_CASE("placement: a V runs chunk 0 down the devices and chunk 1 back up") {
  bp::Schedule s;
  s.devices = 3;
  s.chunks = 2;
  s.placement = bp::Placement::v_shape;
  CHECK(s.stages_on(0) == std::vector<int>{0, 5});
  CHECK(s.stages_on(1) == std::vector<int>{1, 4});
  CHECK(s.stages_on(2) == std::vector<int>{2, 3});
  CHECK(bp::format_placement(s) ==
        "stage -> device: (v-shape) 0->d0 1->d1 2->d2 3->d2 4->d1 5->d0");
  // Four chunks zigzag twice; one chunk is the identity under either placement.
  for (int st = 0; st < 8; ++st)
    CHECK(bp::stage_device(st, 2, bp::Placement::v_shape) == std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0}[st]);
  for (int st = 0; st < 4; ++st) CHECK(bp::stage_device(st, 4, bp::Placement::v_shape) == st);
  CHECK(bp::parse_placement(bp::placement_name(bp::Placement::v_shape)) == bp::Placement::v_shape);
  CHECK_THROWS_WITH_AS(bp::parse_placement("zigzag"),
                       "placement 'zigzag': expected looped or v-shape", std::invalid_argument);
}

// The validator on lowered lists: broken lists rejected with the problem named and the grid
// marked; the happens-before clock and the cycles worked out by hand; the live-activation
// bound against the simulator's peak.
#include <doctest/doctest.h>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/grid.h"
#include "pipeline/schedule/happens_before.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

bp::LoweredSchedule parse(const std::string& lists, int devices, int m, int chunks = 1) {
  const std::string text = "name: broken\ndevices: " + std::to_string(devices) +
                           "\nchunks: " + std::to_string(chunks) +
                           "\nmicrobatches: " + std::to_string(m) + "\n" + lists;
  return bp::parse_schedule_text(text, "test").lists;
}

// The message validate() throws for s, or "" if it accepts s.
std::string rejection(const bp::LoweredSchedule& s, std::optional<int> max_live = std::nullopt) {
  try {
    bp::validate(s, max_live);
  } catch (const bp::ScheduleError& e) {
    return e.what();
  }
  return "";
}

std::string first_line(const std::string& msg) { return msg.substr(0, msg.find('\n')); }

}  // namespace

TEST_CASE("the lowered grid: a transfer takes a tick, a receive runs after its send") {
  // 1RF1 waits for 1SB0 before it on device 1; 0RB1 for 1SB1 at tick 9.
  // clang-format off
  CHECK(bp::format_grid(bp::lower(bp::one_f_one_b(2, 2))) ==
    "tick      0      1      2      3      4      5      6      7      8      9     10     11\n"
    "d0      0F0   0SF0    0F1   0SF1      .      .   0RB0   0BW0      .      .   0RB1   0BW1\n"
    "d1        .      .   1RF0    1F0   1BW0   1SB0   1RF1    1F1   1BW1   1SB1      .      .\n");
  // clang-format on
}

TEST_CASE("a receive before the send it waits for: the cycle is named, wait after wait") {
  // Device 1 waits for stage 2's gradient before it sends stage 2 the activation that
  // gradient is computed from.
  const bp::LoweredSchedule s = parse(
      "d0: 0F0 0SF0 0RB0 0BW0\n"
      "d1: 1RF0 1F0 1RB0 1SF0 1BW0 1SB0\n"
      "d2: 2RF0 2F0 2BW0 2SB0\n", 3, 1);
  CHECK(rejection(s) ==
        "schedule 'broken' is invalid: deadlock: device 1 waits on itself: 1RB0 (device 1, "
        "position 2) waits for 2SB0 (device 2, position 3), which comes after 2RF0 (device 2, "
        "position 0), which waits for 1SF0 (device 1, position 3), which comes after 1RB0 "
        "(device 1, position 2)\n"
        "stage -> device: 0->d0 1->d1 2->d2\n"
        "tick      0      1      2      3\n"
        "d0      0F0   0SF0      .      . | never ran: 0RB0 0BW0\n"
        "d1        .      .   1RF0    1F0 | never ran: [1RB0] 1SF0 1BW0 1SB0\n"
        "d2        .      .      .      . | never ran: 2RF0 2F0 2BW0 2SB0\n");
  const bp::HappensBefore hb = bp::happens_before(s);
  CHECK(hb.cycle.size() == 6);  // two transfers, and 2SB0 back to 2RF0 in three list steps
  CHECK(bp::cycle_cell(hb, s).device == 1);
  CHECK(bp::cycle_cell(hb, s).index == 2);
}

TEST_CASE("a cycle on one device: a compute before what it needs from the same device") {
  // Every stage on one device (p = 1, v = 2): no transfers, and 1F0 listed before 0F0.
  const bp::LoweredSchedule s = parse("d0: 1F0 0F0 1BW0 0BW0\n", 1, 1, 2);
  CHECK(first_line(rejection(s)) ==
        "schedule 'broken' is invalid: deadlock: device 0 waits on itself: 1F0 (device 0, "
        "position 0) needs 0F0 (device 0, position 1), which comes after 1F0 (device 0, "
        "position 0)");
}

TEST_CASE("receives in another order than the sends are fine: sends do not wait") {
  // Device 1 takes micro-batch 1 first; device 0 has sent both before it waits for anything.
  const bp::LoweredSchedule s = parse(
      "d0: 0F0 0SF0 0F1 0SF1 0RB1 0BW1 0RB0 0BW0\n"
      "d1: 1RF1 1F1 1BW1 1SB1 1RF0 1F0 1BW0 1SB0\n", 2, 2);
  CHECK(rejection(s) == "");
  CHECK(bp::happens_before(s).ticks == 14);  // 0RB0 at 12: after 1SB0 at 11
}

TEST_CASE("each kind of lowered mistake is named") {
  auto first = [](const bp::LoweredSchedule& s) { return first_line(rejection(s)); };
  CHECK(first(parse("d0: 0F0 0SF0 0RB0 0BW0\nd1: 1F0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 0SF0 at device 0 position 1 has no matching 1RF0 on "
        "device 1");
  CHECK(first(parse("d0: 0F0 0RB0 0BW0\nd1: 1F0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 0F0 at device 0 position 0 needs 0SF0: its output goes "
        "to stage 1 on device 1");
  CHECK(first(parse("d0: 0SF0 0F0 0RB0 0BW0\nd1: 1RF0 1F0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 0SF0 at device 0 position 0 comes before 0F0 at "
        "position 1");
  CHECK(first(parse("d0: 0F0 0SF0 0RB0 0BW0\nd1: 1F0 1RF0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 1F0 at device 1 position 0 comes before 1RF0 at "
        "position 1");
  CHECK(first(parse("d0: 0F0 0SF0 0RB0 0BW0\nd1: 1RF0 1F0 1SF0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 1SF0 at device 1 position 2: stage 1 has no stage 2 to "
        "send to");
  CHECK(first(parse("d0: 0F0 0SF0 1RF0 1F0 1BW0 1SB0 0RB0 0BW0\n", 1, 1, 2)) ==
        "schedule 'broken' is invalid: 0SF0 at device 0 position 1: stages 0 and 1 both live "
        "on device 0; they hand over without a transfer");
  CHECK(first(parse("d0: 0F0 0SF0 0SF0 0RB0 0BW0\nd1: 1RF0 1F0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 0SF0 appears twice (device 0 position 1 and device 0 "
        "position 2)");
  // The compute checks still come first, with lowered positions.
  CHECK(first(parse("d0: 0F0 0SF0 0RB0 0B0\nd1: 1RF0 1F0 1BW0 1SB0\n", 2, 1)) ==
        "schedule 'broken' is invalid: missing 0W0 (stage 0 lives on device 0)");
  CHECK(first(parse("d0: 0F0 0SF0 0RB0 0BW0\nd1: 1RF0 1F0 1BW0 1SB0 0F0\n", 2, 1)) ==
        "schedule 'broken' is invalid: 0F0 at device 1 position 4: stage 0 lives on device 0");
}

TEST_CASE("an unmatched receive never runs in the grid, and is marked") {
  const bp::LoweredSchedule s = parse("d0: 0F0 0SF0 0RB0 0BW0\nd1: 1RF0 1F0 1BW0\n", 2, 1);
  CHECK(rejection(s) ==
        "schedule 'broken' is invalid: 0RB0 at device 0 position 2 has no matching 1SB0 on "
        "device 1\n"
        "stage -> device: 0->d0 1->d1\n"
        "tick      0      1      2      3      4\n"
        "d0      0F0   0SF0      .      .      . | never ran: [0RB0] 0BW0\n"
        "d1        .      .   1RF0    1F0   1BW0\n");
}

TEST_CASE("live activations: a bound per device, counted in list order") {
  const bp::LoweredSchedule gpipe = bp::lower(bp::gpipe(2, 4));
  CHECK(bp::peak_live(gpipe) == std::vector<int>{4, 4});
  CHECK(rejection(gpipe, 4) == "");
  CHECK(first_line(rejection(gpipe, 3)) ==
        "schedule 'gpipe' is invalid: device 0 holds 4 live activations after 0F3 at device 0 "
        "position 6, over the bound of 3");
  const bp::LoweredSchedule ofob = bp::lower(bp::one_f_one_b(2, 4));
  CHECK(bp::peak_live(ofob) == std::vector<int>{2, 1});
  CHECK(rejection(ofob, 2) == "");
  CHECK(first_line(rejection(ofob, 1)) ==
        "schedule '1f1b' is invalid: device 0 holds 2 live activations after 0F1 at device 0 "
        "position 2, over the bound of 1");
}

TEST_CASE("the list-order peak is the simulator's peak in flight, for every generator") {
  for (const std::string& name : bp::schedule_names())
    for (int p = 1; p <= 4; ++p)
      for (int m : {1, 3, 4, 8}) {
        bp::Schedule s;
        try {
          s = bp::make_schedule(name, p, m, name == "interleaved-1f1b" ? 2 : 1);
        } catch (const std::invalid_argument&) {
          continue;
        }
        CAPTURE(name);
        CAPTURE(p);
        CAPTURE(m);
        const bp::Simulation sim = bp::simulate(s, bp::CostModel{});
        const std::vector<int> peak = bp::peak_live(bp::lower(s));
        for (int d = 0; d < p; ++d) CHECK(peak[d] == sim.stats.devices[d].peak_in_flight);
      }
}

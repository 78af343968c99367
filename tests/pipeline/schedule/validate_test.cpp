// The validator rejects broken schedules with the grid and the offending action marked.
// Expected grids are worked out by hand from the dry-run rule (one action per tick, a
// result visible from the next tick).
#include <doctest/doctest.h>

#include "pipeline/schedule/dry_run.h"
#include "pipeline/schedule/grid.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

// The message validate() throws for s, or "" if it accepts s.
std::string rejection(const bp::Schedule& s) {
  try {
    bp::validate(s);
  } catch (const bp::ScheduleError& e) {
    return e.what();
  }
  return "";
}

bp::Schedule parse(const char* text, int m, int v = 1) {
  return bp::parse_schedule(text, v, m, "broken");
}

}  // namespace

TEST_CASE("grid of a valid 1F1B: one action per tick, '.' for a bubble") {
  const bp::Schedule s = parse("d0: 0F0 0F1 0BW0 0BW1\nd1: 1F0 1BW0 1F1 1BW1\n", 2);
  CHECK(bp::format_grid(s) ==
        "tick      0      1      2      3      4      5\n"
        "d0      0F0    0F1      .   0BW0      .   0BW1\n"
        "d1        .    1F0   1BW0    1F1   1BW1      .\n");
  CHECK(rejection(s) == "");
}

TEST_CASE("a deadlock is reported as 'not progressing', with the grid and the marked cell") {
  // Device 0 wants 0F0's backward before sending 0F1; device 1 wants 0F1 before it sends
  // back the gradient of micro-batch 0. Neither can move after tick 1.
  const bp::Schedule s = parse("d0: 0F0 0BW0 0F1 0BW1\nd1: 1F0 1F1 1BW0 1BW1\n", 2);
  CHECK(rejection(s) ==
        "schedule 'broken' is invalid: not progressing after 2 ticks: device 0 waits at 0BW0 "
        "for 1B0; device 1 waits at 1F1 for 0F1\n"
        "stage -> device: 0->d0 1->d1\n"
        "tick      0      1\n"
        "d0      0F0      . | never ran: [0BW0] 0F1 0BW1\n"
        "d1        .    1F0 | never ran: 1F1 1BW0 1BW1\n");
  const bp::DryRun run = bp::dry_run(s);
  REQUIRE(run.stalls.size() == 2);
  CHECK(run.stalls[0].device == 0);
  CHECK(run.stalls[0].index == 1);
}

TEST_CASE("a duplicated action is marked where it ran, with a caret under it") {
  const bp::Schedule s = parse("d0: 0F0 0BW0 0F0\nd1: 1F0 1BW0\n", 1);
  CHECK(rejection(s) ==
        "schedule 'broken' is invalid: 0F0 appears twice (device 0 position 0 and device 0 "
        "position 2)\n"
        "stage -> device: 0->d0 1->d1\n"
        "tick      0      1      2      3      4\n"
        "d0      0F0      .      .   0BW0  [0F0]\n" +
            std::string(36, ' ') + "^\n" +
        "d1        .    1F0   1BW0      .      .\n");
}

TEST_CASE("each kind of mistake is named") {
  auto first_line = [](const std::string& msg) { return msg.substr(0, msg.find('\n')); };
  // Stage on the wrong device: the lists are printed with the action bracketed.
  const std::string wrong_device = rejection(parse("d0: 0F0 1F0 0BW0\nd1: 1BW0\n", 1));
  CHECK(first_line(wrong_device) ==
        "schedule 'broken' is invalid: 1F0 at device 0 position 1: stage 1 lives on device 1");
  CHECK(wrong_device.find("d0: 0F0 [1F0] 0BW0\n") != std::string::npos);

  CHECK(first_line(rejection(parse("d0: 0F0 0BW0 0F1\nd1: 1F0 1BW0\n", 1))) ==
        "schedule 'broken' is invalid: 0F1 at device 0 position 2: micro-batch out of range "
        "(m = 1)");
  CHECK(first_line(rejection(parse("d0: 0F0 0BW0 2F0\nd1: 1F0 1BW0\n", 1))) ==
        "schedule 'broken' is invalid: 2F0 at device 0 position 2: stage out of range (there "
        "are 2 stages)");
  CHECK(first_line(rejection(parse("d0: 0F0 0B0\nd1: 1F0 1BW0\n", 1))) ==
        "schedule 'broken' is invalid: missing 0W0 (stage 0 lives on device 0)");
  CHECK(first_line(rejection(parse("d0: 0F0 0B0 0W0 0BW0\nd1: 1F0 1BW0\n", 1))) ==
        "schedule 'broken' is invalid: 0BW0 at device 0 position 3: a (stage, micro-batch) "
        "runs either B and W, or BW, not both");
  // W listed before its B: it is marked, and the order is named.
  const std::string w_first = rejection(parse("d0: 0F0 0W0 0B0\nd1: 1F0 1BW0\n", 1));
  CHECK(first_line(w_first) ==
        "schedule 'broken' is invalid: 0W0 at device 0 position 1 comes before 0B0 at position 2");
  CHECK(w_first.find("[0W0]") != std::string::npos);
  CHECK(first_line(rejection(parse("d0: 0BW0 0F0\nd1: 1F0 1BW0\n", 1))) ==
        "schedule 'broken' is invalid: 0BW0 at device 0 position 0 comes before 0F0 at "
        "position 1");
  bp::Schedule no_lists = parse("d0: 0F0 0BW0\n", 1);
  no_lists.devices = 2;
  CHECK(rejection(no_lists) == "schedule 'broken' is invalid: it has 1 lists for 2 devices");
}

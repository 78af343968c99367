// Lowering and the schedule text: lists worked out by hand, counts that follow from the
// placement, and round trips (print, parse, compare).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;
using bp::Instruction;
using bp::Kind;

namespace {

// Every generator's schedule for p = 1..4 and a few m (those it serves).
std::vector<bp::Schedule> zoo() {
  std::vector<bp::Schedule> out;
  for (const std::string& name : bp::schedule_names())
    for (int p = 1; p <= 4; ++p)
      for (int m : {1, 2, 3, 4, 8}) {
        try {
          out.push_back(bp::make_schedule(name, p, m, bp::default_chunks(name)));
        } catch (const std::invalid_argument&) {  // interleaved: m a multiple of p;
        }                                         // dualpipe-v: m >= 2p
      }
  return out;
}

// What f throws (a ScheduleError or std::invalid_argument), or "" if it throws nothing.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("instructions print and parse back; the words of PyTorch's lowered lists") {
  for (int k = 0; k <= static_cast<int>(Kind::RecvB); ++k) {
    const Instruction i{12, static_cast<Kind>(k), 40};
    CHECK(bp::parse_instruction(bp::to_string(i)) == i);
  }
  CHECK(bp::to_string(Instruction{0, Kind::SendF, 3}) == "0SF3");
  CHECK(bp::to_string(Instruction{1, Kind::RecvB, 0}) == "1RB0");
  CHECK(bp::parse_instruction("0BW2") == bp::instruction({0, bp::Op::BW, 2}));
  CHECK(bp::partner({0, Kind::SendF, 3}) == Instruction{1, Kind::RecvF, 3});
  CHECK(bp::partner({1, Kind::SendB, 3}) == Instruction{0, Kind::RecvB, 3});
  CHECK(bp::partner(bp::partner({2, Kind::RecvB, 1})) == Instruction{2, Kind::RecvB, 1});
  CHECK(bp::lane_of(Kind::SendB) == bp::Lane::Send);
  CHECK(bp::lane_of(Kind::RecvF) == bp::Lane::Recv);
  CHECK(bp::lane_of(Kind::W) == bp::Lane::Compute);
  CHECK_THROWS_WITH_AS(bp::parse_instruction("0SX3"),
                       doctest::Contains("action '0SX3': expected stage, op, micro-batch"),
                       std::invalid_argument);
  CHECK_THROWS_AS(bp::parse_instruction("SF3"), std::invalid_argument);
  CHECK_THROWS_AS(bp::parse_instruction("0SF"), std::invalid_argument);
}

TEST_CASE("1F1B on two devices, lowered by hand: receive right before, send right after") {
  const bp::LoweredSchedule l = bp::lower(bp::one_f_one_b(2, 2));
  CHECK(bp::format_lists(l) ==
        "d0: 0F0 0SF0 0F1 0SF1 0RB0 0BW0 0RB1 0BW1\n"
        "d1: 1RF0 1F0 1BW0 1SB0 1RF1 1F1 1BW1 1SB1\n");
}

TEST_CASE("interleaved: stage 1 -> 2 crosses back from device 1 to device 0") {
  const bp::LoweredSchedule l = bp::lower(bp::interleaved_1f1b(2, 2, 2));
  CHECK(bp::format_lists(l) ==
        "d0: 0F0 0SF0 0F1 0SF1 2RF0 2F0 2SF0 2RF1 2F1 2SF1 2RB0 2BW0 2SB0 2RB1 2BW1 2SB1 "
        "0RB0 0BW0 0RB1 0BW1\n"
        "d1: 1RF0 1F0 1SF0 1RF1 1F1 1SF1 3RF0 3F0 3BW0 3SB0 3RF1 3F1 3BW1 3SB1 1RB0 1BW0 "
        "1SB0 1RB1 1BW1 1SB1\n");
}

TEST_CASE("a V: the turn at device p-1 hands over in place, the way back crosses devices") {
  // zb-v on 2 devices: stages 0 and 3 on d0, 1 and 2 on d1; 1 -> 2 is the turn. Device 0
  // runs 3W0 while it waits for stage 1's gradient.
  const bp::LoweredSchedule l = bp::lower(bp::zb_v(2, 1));
  CHECK(bp::format_lists(l) ==
        "d0: 0F0 0SF0 3RF0 3F0 3B0 3SB0 3W0 0RB0 0B0 0W0\n"
        "d1: 1RF0 1F0 2F0 2SF0 2RB0 2B0 1B0 1SB0 2W0 1W0\n");
}

TEST_CASE("every generator: lowering adds 4 transfers per stage boundary and micro-batch") {
  for (const bp::Schedule& s : zoo()) {
    CAPTURE(s.name);
    CAPTURE(s.devices);
    CAPTURE(s.microbatches);
    const bp::LoweredSchedule l = bp::lower(s);
    // One device hands over without transfers; otherwise every boundary between stages is
    // crossed by an activation and a gradient, each a send and a receive — except where a V
    // turns, between two stages of one device.
    const int turns = s.placement == bp::Placement::v_shape ? s.chunks - 1 : 0;
    const size_t boundaries = s.devices == 1 ? 0 : size_t(s.stages() - 1 - turns);
    CHECK(l.total() == s.total_actions() + 4 * boundaries * s.microbatches);
    CHECK(bp::compute_only(l).lists == s.lists);
    CHECK_NOTHROW(bp::validate(l));
    // The text form: print, parse, the same lists and header.
    const bp::ScheduleText back = bp::parse_schedule_text(bp::format_schedule_text(l), "x");
    CHECK(back.lists.lists == l.lists);
    CHECK(back.lists.name == s.name);
    CHECK(back.lists.devices == s.devices);
    CHECK(back.lists.chunks == s.chunks);
    CHECK(back.lists.microbatches == s.microbatches);
    CHECK(back.lists.batch_units == s.batch_units);
    CHECK(back.lists.placement == s.placement);
    CHECK(back.lowered() == (s.devices > 1));
    const bp::ScheduleText plain = bp::parse_schedule_text(bp::format_schedule_text(s), "x");
    CHECK(bp::compute_only(plain.lists).lists == s.lists);
    CHECK_FALSE(plain.lowered());
  }
}

TEST_CASE("schedule text: errors name the source and the line") {
  auto error = [](std::string_view text) {
    try {
      bp::parse_schedule_text(text, "my.schedule");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("devices: 2\nmicrobatches: 1\nd0: 0F0 0SF0\n# comment\nd1: 1RF0 1Q0\n") ==
        "my.schedule:5: action '1Q0': expected stage, op, micro-batch with op F, B, W, BW or a "
        "transfer SF, RF, SB, RB (e.g. 1F3, 0BW2, 0SF3, 1RF3)");
  CHECK(error("devices: 2\nmicrobatches: 1\nd1: 1F0\n") ==
        "my.schedule:3: expected 'd0:' next, got 'd1:'");
  CHECK(error("devices: 1\nd0: 0F0\n") ==
        "my.schedule:2: a device line before the header said 'devices:' and 'microbatches:'");
  CHECK(error("devices: 2\nmicrobatches: 1\nd0: 0F0\n") ==
        "my.schedule: 1 device lines for 'devices: 2'");
  CHECK(error("devices: 1\nmicrobatches: 1\nd0: 0F0\nd1: 1F0\n") ==
        "my.schedule:4: more device lines than 'devices: 1'");
  CHECK(error("devices: two\n") ==
        "my.schedule:1: 'devices: two' is not a whole number of at least 1");
  CHECK(error("stages: 2\n") ==
        "my.schedule:1: unknown header key 'stages' (name, devices, chunks, microbatches, "
        "batch_units, placement)");
  CHECK(error("placement: zigzag\n") ==
        "my.schedule:1: placement 'zigzag': expected looped or v-shape");
  CHECK(error("devices: 1\nmicrobatches: 1\nd0: 0F0 0BW0\nchunks: 2\n") ==
        "my.schedule:4: header line 'chunks:' after the device lines");
  CHECK(error("devices: 1\n0F0\n") ==
        "my.schedule:2: expected 'key: value' or 'dN: actions', got '0F0'");
  // Counts the lists cannot hold are refused before validation sizes its tables by them (it
  // once took 2.3 GB to find two actions missing 399,999,998).
  CHECK(error("devices: 2\nmicrobatches: 100000000\nd0: 0F0\nd1: 1F0\n") ==
        "my.schedule: 2 devices x 1 chunk x 100000000 micro-batches need at least 400000000 "
        "actions (a forward and a backward of each stage and micro-batch); the device lines "
        "hold 2");
  // The file's bytes are quoted printable: a control byte or one that is no UTF-8 as \xNN
  // (they went to the terminal raw, a NUL ending the message mid-quote).
  CHECK(error(std::string("\xff\x01junk\0more\n", 12)) ==
        "my.schedule:1: expected 'key: value' or 'dN: actions', got '\\xff\\x01junk\\x00more'");
}

TEST_CASE("schedule files: validated, lowered, refused with the file, line and cycle") {
  const auto dir = std::filesystem::temp_directory_path() / "brigade-lowering-test";
  std::filesystem::create_directories(dir);
  auto file = [&](const char* name, const std::string& text) {
    const std::string path = (dir / name).string();
    std::ofstream(path) << text;
    return path;
  };
  // A compute-only file is lowered; the runtime gets its compute lists back.
  const bp::Schedule zb = bp::zb_h1(3, 4);
  const std::string plain = file("zb.schedule", bp::format_schedule_text(zb));
  CHECK(bp::load_schedule(plain).lists == bp::lower(zb).lists);
  CHECK(bp::load_compute_schedule(plain).lists == zb.lists);
  // A lowered file as lower() writes it runs too.
  const std::string lowered = file("zb-lowered.schedule", bp::format_schedule_text(bp::lower(zb)));
  CHECK(bp::load_compute_schedule(lowered).lists == zb.lists);

  // Device 0 waits for micro-batch 0's gradient before it sends micro-batch 0's activation.
  const std::string cyclic = file("cyclic.schedule",
                                  "name: hand-written\n"
                                  "devices: 2\n"
                                  "microbatches: 1\n"
                                  "d0: 0F0 0RB0 0SF0 0BW0\n"
                                  "d1: 1RF0 1F0 1BW0 1SB0\n");
  const std::string cycle = error_of([&] { bp::load_schedule(cyclic); });
  CAPTURE(cycle);
  CHECK(starts_with(cycle, cyclic + ":4: 0RB0: schedule 'hand-written' is invalid: deadlock: "
                                    "device 0 waits on itself: 0RB0 (device 0, position 1) "
                                    "waits for 1SB0 (device 1, position 3)"));
  CHECK_THROWS_AS(bp::load_compute_schedule(cyclic), bp::ScheduleError);

  // Receives fetched early are fine for the simulator, not where the runtime communicates.
  const std::string early = file("early.schedule",
                                 "devices: 2\nmicrobatches: 2\n"
                                 "d0: 0F0 0SF0 0F1 0SF1 0RB0 0RB1 0BW0 0BW1\n"
                                 "d1: 1RF0 1RF1 1F0 1BW0 1SB0 1F1 1BW1 1SB1\n");
  CHECK(bp::load_schedule(early).lists[1][1] == Instruction{1, Kind::RecvF, 1});
  CHECK(starts_with(error_of([&] { bp::load_compute_schedule(early); }),
                    early + ": device 0 position 5: 0RB1 is not where the runtime communicates"));
  // A compute-only file that does not validate names its line too.
  const std::string backwards =
      file("backwards.schedule", "devices: 2\nmicrobatches: 1\nd0: 0F0 0BW0\nd1: 1BW0 1F0\n");
  CHECK(starts_with(error_of([&] { bp::load_schedule(backwards); }),
                    backwards + ":4: 1BW0: schedule '" + backwards +
                        "' is invalid: 1BW0 at device 1 position 0 comes before 1F0 at "
                        "position 1"));
  CHECK(starts_with(error_of([&] { bp::load_schedule((dir / "absent.schedule").string()); }),
                    "cannot open schedule file"));
  std::filesystem::remove_all(dir);
}

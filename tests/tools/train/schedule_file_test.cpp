// brigade-train --schedule-file, through the built binary: a hand-written file of lowered lists
// (receives where the writer put them, not where lower() would) trains exactly as the
// generated schedule it reorders, and a file whose lists would deadlock is refused, its cycle
// named with the file and line, before anything trains (exit 2).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// The small model on two CPU devices, 1F1B's shape (2 devices, 2 micro-batches), 4 steps.
std::vector<std::string> two_devices(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "128",
                                   "--batch", "32", "--devices", "cpu:0,cpu:1",
                                   "--microbatches", "2", "--steps", "4",
                                   "--threads-per-device", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("schedule file: hand-written lowered lists train bit for bit like the generated 1f1b") {
  const fs::path dir = temp_dir("schedule-file");
  // lower(1f1b) has d1: 1RF0 1F0 1BW0 1SB0 1RF1 1F1 1BW1 1SB1. Here device 1 takes both
  // activations before it computes anything (a prefetch lower() never writes): legal, since
  // device 0 sends both before it waits for a gradient. Same computations in the same order
  // on each stage, so the same bits; only when the copies are waited for differs.
  const std::string file = write_file(dir / "prefetch.schedule",
                                      "# device 1 receives both activations first\n"
                                      "name: prefetch\n"
                                      "devices: 2\n"
                                      "chunks: 1\n"
                                      "microbatches: 2\n"
                                      "d0: 0F0 0SF0 0F1 0SF1 0RB0 0BW0 0RB1 0BW1\n"
                                      "d1: 1RF0 1RF1 1F0 1BW0 1SB0 1F1 1BW1 1SB1\n");
  const Run generated = run_train(two_devices(dir, {"--schedule", "1f1b", "--metrics",
                                                    (dir / "generated.jsonl").string()}));
  CAPTURE(generated.output);
  REQUIRE(generated.status == 0);
  const Run written = run_train(two_devices(dir, {"--schedule-file", file, "--metrics",
                                                  (dir / "written.jsonl").string()}));
  CAPTURE(written.output);
  REQUIRE(written.status == 0);
  CHECK(written.output.find("schedule prefetch") != std::string::npos);
  const std::vector<double> a = step_losses(dir / "generated.jsonl");
  const std::vector<double> b = step_losses(dir / "written.jsonl");
  REQUIRE(a.size() == 4);
  CHECK(b == a);
}

TEST_CASE("schedule file: a receive whose send comes after it is refused with the cycle, before training") {
  const fs::path dir = temp_dir("schedule-file-cycle");
  // Device 0 asks for micro-batch 0's gradient before it sends the activation that gradient
  // is computed from: each device waits on the other.
  const std::string file = write_file(dir / "cyclic.schedule",
                                      "name: cyclic\n"
                                      "devices: 2\n"
                                      "chunks: 1\n"
                                      "microbatches: 1\n"
                                      "d0: 0F0 0RB0 0SF0 0BW0\n"
                                      "d1: 1RF0 1F0 1BW0 1SB0\n");
  const Run r = run_train({"--model", write_file(dir / "small.model", kSmallModel), "--data",
                           "synthetic", "--synthetic-count", "64", "--batch", "32", "--devices",
                           "cpu:0,cpu:1", "--microbatches", "1", "--steps", "1",
                           "--schedule-file", file});
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("cyclic.schedule:5: 0RB0") != std::string::npos);  // d0's line
  CHECK(r.output.find("deadlock") != std::string::npos);
  CHECK(r.output.find("0RB0") != std::string::npos);
  CHECK(r.output.find("1SB0") != std::string::npos);
  CHECK(r.output.find("step 1") == std::string::npos);  // nothing trained
}

// Once in the plan's words ("lowered: lists of devices 2, ..., batch_units 1, but the plan
// has ..."), naming no flag.
TEST_CASE("schedule file: a file for another shape of run names the flags that differ") {
  const fs::path dir = temp_dir("schedule-file-shape");
  const std::string lists = "d0: 0F0 0SF0 0F1 0SF1 0RB0 0BW0 0RB1 0BW1\n"
                            "d1: 1RF0 1F0 1BW0 1SB0 1RF1 1F1 1BW1 1SB1\n";
  const std::string file = write_file(
      dir / "two.schedule", "name: two\ndevices: 2\nchunks: 1\nmicrobatches: 2\n" + lists);
  std::vector<std::string> four = two_devices(dir, {"--schedule-file", file});
  four[std::find(four.begin(), four.end(), "--microbatches") - four.begin() + 1] = "4";
  const Run r = run_train(four);
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("--schedule-file " + file +
                      ": written for 2 devices, 1 chunk per device and 2 micro-batches; this run "
                      "has 2 devices (--devices), 1 chunk (--chunks) and 4 micro-batches "
                      "(--microbatches)") != std::string::npos);
  const std::string costed = write_file(
      dir / "costed.schedule",
      "name: costed\ndevices: 2\nchunks: 1\nmicrobatches: 2\nbatch_units: 3\n" + lists);
  const Run c = run_train(two_devices(dir, {"--schedule-file", costed}));
  CAPTURE(c.output);
  CHECK(c.status == 2);
  CHECK(c.output.find("--schedule-file " + costed + ": batch_units 3 (each micro-batch costed as "
                      "3, for brigade-simulate); brigade-train runs files of batch_units 1") !=
        std::string::npos);
}

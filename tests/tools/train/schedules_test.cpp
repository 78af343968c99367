// brigade-train's schedules end to end, through the built binary, each against the same
// training on one CPU device with the same micro-batches accumulated in order — bit for bit,
// the parameters saved with --save and every step's loss:
//   - GPipe on four devices (its backwards run oldest micro-batch first, as one device's do);
//   - naive with --microbatches 4: four micro-batches, one after another, not one uncut;
//   - PyTorch's schedule CSV (pipeline/schedule/pytorch_csv.h): Brigade's interleaved 1F1B
//     printed in it, and a file written by hand in PyTorch's words.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/pytorch_csv.h"
#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// Eight layers, so that four devices can hold two stages each.
const char* kEightLayers =
    "input 28x28x1\n"
    "device 0\n"
    "conv2d filters=4 kernel=3x3 activation=relu\n"  // -> 26x26x4
    "maxpool2d pool=2x2\n"                            // -> 13x13x4
    "conv2d filters=4 kernel=3x3 activation=relu\n"  // -> 11x11x4
    "maxpool2d pool=2x2\n"                            // -> 5x5x4
    "dropout rate=0.25\n"
    "flatten\n"                                       // -> 100
    "dense units=16 activation=relu\n"
    "dense units=10 activation=softmax\n";

struct Trained {
  std::string output;
  std::vector<double> losses;
  std::string parameters;  // the bytes --save wrote
};

// Three steps of a batch of 32 in `microbatches`, on `devices`; `name` keeps the runs apart.
Trained train(const fs::path& dir, const std::string& name, const std::string& devices,
              int microbatches, std::vector<std::string> extra) {
  const fs::path metrics = dir / (name + ".jsonl"), saved = dir / (name + ".params");
  std::vector<std::string> args = {
      "--model", write_file(dir / "eight.model", kEightLayers), "--data", "synthetic",
      "--synthetic-count", "96", "--batch", "32", "--steps", "3", "--devices", devices,
      "--microbatches", std::to_string(microbatches), "--threads-per-device", "1",
      "--metrics", metrics.string(), "--save", saved.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const Run r = run_train(args);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(saved, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return {r.output, step_losses(metrics), bytes.str()};
}

void check_same_bits(const Trained& got, const Trained& want) {
  REQUIRE(want.losses.size() == 3);
  CHECK(got.losses == want.losses);
  REQUIRE(!want.parameters.empty());
  CHECK(got.parameters == want.parameters);
}

}  // namespace

TEST_CASE("schedules: GPipe on four CPU devices trains bit for bit like one device") {
  const fs::path dir = temp_dir("gpipe-four");
  const Trained one = train(dir, "one", "cpu:0", 4, {});
  const Trained gpipe = train(dir, "gpipe", "cpu:0,cpu:1,cpu:2,cpu:3", 4,
                              {"--schedule", "gpipe", "--balance", "flops"});
  CHECK(gpipe.output.find("schedule gpipe, 4 stages on 4 devices") != std::string::npos);
  check_same_bits(gpipe, one);
}

TEST_CASE("schedules: naive --microbatches 4 runs four micro-batches, one after another") {
  const fs::path dir = temp_dir("naive-four");
  const Trained one = train(dir, "one", "cpu:0", 4, {});
  const Trained naive = train(dir, "naive", "cpu:0,cpu:1", 4, {"--schedule", "naive",
                                                                 "--balance", "flops"});
  CHECK(naive.output.find("schedule naive, 2 stages on 2 devices, 4 micro-batches") !=
        std::string::npos);
  check_same_bits(naive, one);
}

TEST_CASE("schedules: PyTorch's CSV of interleaved 1F1B, p=4 m=8, trains like the schedule") {
  const fs::path dir = temp_dir("pytorch-csv");
  namespace bp = brigade::pipeline;
  const std::string csv = write_file(
      dir / "interleaved.csv", bp::format_pytorch_csv(bp::make_schedule("interleaved-1f1b", 4, 8, 2)));
  const std::vector<std::string> four = {"--chunks", "2", "--balance", "flops"};
  std::vector<std::string> by_name = four, by_file = four;
  by_name.insert(by_name.end(), {"--schedule", "interleaved-1f1b"});
  by_file.insert(by_file.end(), {"--schedule-file", csv});
  const std::string devices = "cpu:0,cpu:1,cpu:2,cpu:3";
  const Trained named = train(dir, "named", devices, 8, by_name);
  const Trained read = train(dir, "read", devices, 8, by_file);
  CHECK(read.output.find("8 stages on 4 devices, 8 micro-batches") != std::string::npos);
  check_same_bits(read, named);
  check_same_bits(read, train(dir, "one", "cpu:0", 8, {}));
}

TEST_CASE("schedules: a CSV written by hand in PyTorch's words trains like 1f1b") {
  // Two ranks, 1F1B with PyTorch's kinds: B is its FULL_BACKWARD (Brigade's BW), empty cells
  // are its bubbles, UNSHARD/RESHARD/REDUCE_GRAD its per-stage actions, rows end in \r\n as
  // Python's csv module writes them.
  const fs::path dir = temp_dir("pytorch-csv-hand");
  const std::string csv = write_file(dir / "hand.csv",
                                     "0UNSHARD,0F0,0F1,,,0B0,,0B1,0REDUCE_GRAD,0RESHARD\r\n"
                                     "1UNSHARD,,1F0,1B0,1F1,1B1,1REDUCE_GRAD,1RESHARD\r\n");
  const Trained named =
      train(dir, "named", "cpu:0,cpu:1", 2, {"--schedule", "1f1b", "--balance", "flops"});
  const Trained read =
      train(dir, "read", "cpu:0,cpu:1", 2, {"--schedule-file", csv, "--balance", "flops"});
  CHECK(read.output.find("schedule " + csv) != std::string::npos);
  check_same_bits(read, named);
}

// brigade-simulate (BRIGADE_SIMULATE): the CSV it prints reads back as the same CSV, a file
// prints as it was written, and every schedule's row carries its bound and gap.
TEST_CASE("schedules: brigade-simulate prints PyTorch's CSV that reads back, and the bounds") {
  const char* simulate = std::getenv("BRIGADE_SIMULATE");
  REQUIRE_MESSAGE(simulate != nullptr, "BRIGADE_SIMULATE is not set: run through meson test");
  const fs::path dir = temp_dir("simulate-csv");
  const std::string program = std::string(simulate);
  for (const char* lowered : {"", " --lowered"}) {
    CAPTURE(lowered);
    const Run printed = run_command(program + " --schedule interleaved-1f1b --stages 4 "
                                    "--microbatches 8 --print-schedule --format pytorch-csv" +
                                    lowered);
    REQUIRE(printed.status == 0);
    namespace bp = brigade::pipeline;
    const bp::Schedule s = bp::make_schedule("interleaved-1f1b", 4, 8, 2);
    CHECK(printed.output == (*lowered ? bp::format_pytorch_csv(bp::lower(s))
                                      : bp::format_pytorch_csv(s)));
    const std::string csv = write_file(dir / "i.csv", printed.output);
    const Run again = run_command(program + " --schedule-file " + csv +
                                  " --print-schedule --format pytorch-csv");
    CHECK(again.status == 0);
    CHECK(again.output == printed.output);
  }
  const Run all = run_command(program + " --schedule all --stages 4 --microbatches 8 --no-grid");
  REQUIRE(all.status == 0);
  CHECK(all.output.find("makespan    bound  gap %") != std::string::npos);
  // 1F1B's actions with unit costs: 3(m + p - 1) = 33, and 1F1B reaches it.
  CHECK(all.output.find("1f1b               4  1   8     33.00    33.00    0.0") !=
        std::string::npos);
}

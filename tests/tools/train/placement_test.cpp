// What brigade-train says about its cut (tools/train/placement.h): a warning with the command
// that balances a cut where a device has under 5 % of the work, and interleaved-1f1b's default
// of 2 chunks, said; for devices of different speeds, the warning when they share cores, and
// the benchmark's table.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "layers/model/model_file.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/runtime/plan.h"
#include "tests/tools/train/run_binary.h"
#include "tools/train/options.h"
#include "tools/train/placement.h"
#include "tools/train/suggested_command.h"

using namespace brigade::train;
using brigade::train::test::Run;
using brigade::train::test::run_command;
namespace fs = std::filesystem;

namespace {

// Forward FLOPs per sample by hand: dense 2·in·out; relu none. 8 -> 16 -> 16 -> 2.
const char* kThree =
    "input 8\n"
    "dense units=16 activation=relu\n"  // 2·8·16 = 256 FLOPs,  8·16 + 16 = 144 parameters
    "dense units=16\n"                  // 2·16·16 = 512,      16·16 + 16 = 272
    "relu\n"                            // 0,                   0
    "dense units=2\n";                  // 2·16·2 = 64,        16·2 + 2 = 34

std::vector<double> flops() { return {256, 512, 0, 64}; }

// A plan over cpu:0 and cpu:1 cut at `cut`, each layer weighing `work` on both.
brigade::pipeline::Plan plan_of(const brigade::pipeline::Partition& cut,
                                const std::vector<double>& work) {
  brigade::pipeline::Plan plan;
  plan.devices = {brigade::Device::cpu(0), brigade::Device::cpu(1)};
  plan.balance = brigade::pipeline::Balance::params;
  plan.cut = cut;
  plan.work = brigade::pipeline::DeviceCosts(2, work);
  plan.work_name = "forward FLOPs";
  return plan;
}

}  // namespace

TEST_CASE("placement: a device under 5 % of the work is warned about, with the balancing command") {
  const brigade::model::ModelSpec spec = brigade::model::parse_model(kThree, "three");
  const std::vector<const char*> args = {"brigade-train", "--devices", "cpu:0,cpu:1",
                                         "--balance=params"};
  const Options command = *parse_options(static_cast<int>(args.size()), args.data());
  // [dense_1 dense_2 relu | dense_3]: 768 / 64 of 832 FLOPs, 92.3 % / 7.7 %: balanced enough.
  CHECK(imbalance_warning(plan_of(brigade::pipeline::at_cuts(4, {3}), flops()), spec, command, 4) ==
        "");
  // [dense_1 dense_2 | relu dense_3] weighed as if dense_3 were free: 100 % / 0 %. Cut by
  // these weights, [dense_1 | dense_2 relu dense_3] is 256 / 512 of 768: 33.3 % / 66.7 %.
  const std::string w = imbalance_warning(
      plan_of(brigade::pipeline::at_cuts(4, {2}), {256, 512, 0, 0}), spec, command, 4);
  CHECK(w == "warning: cpu:1 has 0.0 % of the work (forward FLOPs; per device 100.0 % / 0.0 %): "
             "it idles, and a step takes as long as cpu:0's share. Cut by forward FLOPs it is "
             "33.3 % / 66.7 %:\n  brigade-train --devices cpu:0,cpu:1 --balance=flops");
  // One layer of all the work: no cut over 2 gives each 5 %; one device then.
  const std::string one = imbalance_warning(
      plan_of(brigade::pipeline::at_cuts(4, {2}), {0, 1000, 0, 0}), spec, command, 4);
  CHECK(one.find("No cut over 2 devices gives each 5.0 %; over 1:\n  brigade-train --devices "
                 "cpu:0 --balance=params") != std::string::npos);
}

// A command that would be refused (brigade-train weighs it by its memory check) is never printed:
// the warning says why in its place. The refusal is asked about the command the warning would
// print: on fewer devices, or cut by FLOPs over these.
TEST_CASE("placement: the balancing command that would be refused is replaced by why") {
  const brigade::model::ModelSpec spec = brigade::model::parse_model(kThree, "three");
  const std::vector<const char*> args = {"brigade-train", "--devices", "cpu:0,cpu:1",
                                         "--balance=params"};
  const Options command = *parse_options(static_cast<int>(args.size()), args.data());
  std::vector<Suggestion> asked;
  const SuggestionRefusal too_large = [&](Suggestion& fix) {
    asked.push_back(fix);
    return std::optional<std::string>("a step would not fit the devices' memory");
  };
  const std::string one = imbalance_warning(
      plan_of(brigade::pipeline::at_cuts(4, {2}), {0, 1000, 0, 0}), spec, command, 4, {},
      too_large);
  CHECK(one.ends_with("No cut over 2 devices gives each 5.0 %; one over 1 would, but a step "
                      "would not fit the devices' memory."));
  CHECK(one.find('\n') == std::string::npos);  // no command
  REQUIRE(asked.size() == 1);
  REQUIRE(asked[0].fewer_devices.has_value());
  CHECK(asked[0].fewer_devices->size() == 1);

  const std::string cut = imbalance_warning(
      plan_of(brigade::pipeline::at_cuts(4, {2}), {256, 512, 0, 0}), spec, command, 4, {},
      too_large);
  CHECK(cut.ends_with("Cut by forward FLOPs it is 33.3 % / 66.7 %, but a step would not fit the "
                      "devices' memory."));
  REQUIRE(asked.size() == 2);
  CHECK(!asked[1].fewer_devices.has_value());
  CHECK(asked[1].flags == std::vector<std::pair<std::string, std::string>>{{"--balance", "flops"}});

  // A command that would run is printed as before.
  const SuggestionRefusal runs = [](Suggestion&) { return std::optional<std::string>(); };
  CHECK(imbalance_warning(plan_of(brigade::pipeline::at_cuts(4, {2}), {0, 1000, 0, 0}), spec,
                          command, 4, {}, runs)
            .ends_with("over 1:\n  brigade-train --devices cpu:0 --balance=params"));

  // One that runs once given more micro-batches (brigade-train's memory check finds how many)
  // is printed with them, and the warning says why they are there.
  const SuggestionRefusal runs_finer = [](Suggestion& fix) {
    fix.flags.emplace_back("--microbatches", "8");
    fix.microbatches = 8;
    return std::optional<std::string>();
  };
  CHECK(imbalance_warning(plan_of(brigade::pipeline::at_cuts(4, {2}), {0, 1000, 0, 0}), spec,
                          command, 4, {}, runs_finer)
            .ends_with("over 1, with 8 micro-batches for a step to fit the devices' memory:\n  "
                       "brigade-train --devices cpu:0 --balance=params --microbatches 8"));
}

TEST_CASE("placement: interleaved-1f1b without --chunks runs 2 chunks and says so") {
  std::vector<const char*> args = {"brigade-train", "--schedule", "interleaved-1f1b"};
  const Options o = *parse_options(static_cast<int>(args.size()), args.data());
  CHECK(o.chunks == 2);
  CHECK(o.balance == "flops");
  REQUIRE(o.notes.size() == 1);
  args = {"brigade-train", "--schedule", "interleaved-1f1b", "--chunks", "3", "--balance", "params"};
  const Options given = *parse_options(static_cast<int>(args.size()), args.data());
  CHECK(given.chunks == 3);
  CHECK(given.balance == "params");
  CHECK(given.notes.empty());

  const fs::path dir = test::temp_dir("interleaved");
  const test::Run r = test::run_train(
      {"--model", test::write_file(dir / "small.model", test::kSmallModel), "--data",
       "synthetic", "--synthetic-count", "128", "--batch", "32", "--steps", "1", "--devices",
       "cpu:0,cpu:1", "--schedule", "interleaved-1f1b"});
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("--schedule interleaved-1f1b without --chunks: 2 chunks") != std::string::npos);
  CHECK(r.output.find("4 stages on 2 devices") != std::string::npos);
}

TEST_CASE("placement: the README's two-device command warns, and the command it gives does not") {
  const fs::path dir = test::temp_dir("balance");
  const std::vector<std::string> base = {"--data", "synthetic", "--synthetic-count", "128",
                                         "--batch", "32", "--steps", "1", "--devices",
                                         "cpu:0,cpu:1", "--schedule", "zb-h1", "--microbatches", "8"};
  const test::Run r = test::run_train(base);
  CAPTURE(r.output);
  CHECK(r.status == 0);
  const size_t at = r.output.find("warning: cpu:1 has 0.6 % of the work");
  REQUIRE(at != std::string::npos);
  // The command on the next line, run as given (its words have no spaces).
  const size_t start = r.output.find("\n  ", at) + 3;
  const std::string fix = r.output.substr(start, r.output.find('\n', start) - start);
  CHECK(fix.ends_with("--balance flops"));
  const test::Run balanced = test::run_command(fix);
  CAPTURE(balanced.output);
  CHECK(balanced.status == 0);
  CHECK(balanced.output.find("of the work") == std::string::npos);  // no imbalance warning
  CHECK(balanced.output.find("(57.0 %)") != std::string::npos);
}

TEST_CASE("placement: CPU devices of different speeds, more threads than cores: a warning") {
  RunDevices p;
  p.devices = {brigade::Device::cpu(0), brigade::Device::cpu(1)};
  p.threads = {2, 1};
  // 3 compute threads on 2 hardware threads: the devices share cores.
  const std::string w = shared_cores_warning(p, 2);
  CHECK(w.find("3 compute threads (threads per CPU device: 2, 1)") != std::string::npos);
  CHECK(w.find("this machine's 2 hardware threads") != std::string::npos);
  // On 3 or more, each device has cores of its own.
  CHECK(shared_cores_warning(p, 3).empty());
  // Devices alike are cut evenly whatever the cores: nothing to warn about.
  p.threads = {2, 2};
  CHECK(shared_cores_warning(p, 2).empty());
  // A GPU beside a CPU device: the GPU's 0 threads take no core.
  p.devices = {brigade::Device::cuda(0), brigade::Device::cpu(1)};
  p.threads = {0, 2};
  CHECK(shared_cores_warning(p, 2).empty());
  CHECK(!shared_cores_warning(p, 1).empty());
}

TEST_CASE("placement: brigade-bench-pipeline compares the cut for the speeds with the even one") {
  const char* bench = std::getenv("BRIGADE_BENCH_PIPELINE");
  REQUIRE_MESSAGE(bench != nullptr, "BRIGADE_BENCH_PIPELINE is not set: run through meson test");
  const Run r = run_command(std::string(bench) +
                            " --model tiny_cnn --devices 2 --threads-per-device 2,1 --batch 32"
                            " --microbatches 4 --steps 1 --schedules 1f1b");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const size_t table = r.output.find("predicted from the profiles: alike, speeds, ratio\n");
  REQUIRE(table != std::string::npos);
  // Two rows, 1f1b and zb-auto at m = 4: measured and predicted rates, each ratio theirs.
  std::istringstream rows(r.output.substr(r.output.find('\n', table) + 1));
  for (const char* name : {"1f1b", "zb-auto"}) {
    std::string schedule;
    int m = 0;
    double alike = 0, speeds = 0, ratio = 0, predicted_alike = 0, predicted_speeds = 0,
           predicted_ratio = 0;
    rows >> schedule >> m >> alike >> speeds >> ratio >> predicted_alike >> predicted_speeds >>
        predicted_ratio;
    REQUIRE(rows);
    CHECK(schedule == name);
    CHECK(m == 4);
    CHECK(alike > 0);
    CHECK(predicted_alike > 0);
    CHECK(ratio == doctest::Approx(speeds / alike).epsilon(0.01));
    CHECK(predicted_ratio == doctest::Approx(predicted_speeds / predicted_alike).epsilon(0.01));
  }
}

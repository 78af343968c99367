// brigade-train on a disk that fills up during the run (a small tmpfs, tests/support/small_disk.h):
// each of --metrics, --trace, --plot, --save and --checkpoint-dir ends the run with exit 1 and
// a message naming the file and the reason ("No space left on device"), and leaves no empty or
// cut file under the file's name, nor a temporary beside it.
//
// The preflight (preflight.h) refuses with exit 2 a disk that cannot hold one parameter file
// or checkpoint, so each disk here has room for what the preflight counts and fills during the
// run: the metrics grow a line per step; the trace and the plot are written at the end, past
// the one block left free; --save and the second checkpoint find the room taken by a file the
// run wrote before (--save-initial), which the preflight counts apart.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "tests/support/small_disk.h"
#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
using brigade::testing::SmallDisk;
namespace fs = std::filesystem;

namespace {

const std::string kFull = "No space left on device";

// 508,810 parameters (2,035,240 bytes of float32): a parameter file or an SGD checkpoint fits
// a 3.5 MiB disk with the preflight's 1 MiB for headers, and two of them do not.
const char* kWideModel =
    "input 28x28x1\n"
    "device 0\n"
    "flatten\n"
    "dense units=640 activation=relu\n"
    "device 1\n"
    "dense units=10 activation=softmax\n";
constexpr uint64_t kTwoFilesDoNotFit = 3584 << 10;
constexpr uint64_t kThreeFilesDoNotFit = 5632 << 10;

std::vector<std::string> run_args(const fs::path& dir, const char* model, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "model.model", model), "--data",
                                   "synthetic", "--synthetic-count", "128", "--batch", "8",
                                   "--optimizer", "sgd", "--devices", "cpu:0,cpu:1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// What the disk holds besides the test's filler: no temporary may be left there.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() != "filler") out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

// The run failed while running (exit 1), saying which file and that the disk is full.
void check_failed_on_full_disk(const Run& r, const fs::path& file) {
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find(file.string()) != std::string::npos);
  CHECK(r.output.find(kFull) != std::string::npos);
}

}  // namespace

TEST_CASE("full disk: --metrics stops the run at the line that does not fit; whole lines stay") {
  SmallDisk disk("metrics", 64 << 10);
  if (!disk.mounted()) {
    MESSAGE("SKIP: " << disk.why());
    return;
  }
  disk.leave_free(4096);  // about 25 lines of ~160 bytes
  const fs::path dir = temp_dir("full-metrics"), metrics = disk.path() / "m.jsonl";
  const fs::path checkpoints = dir / "ckpt";  // on a disk with room: it must survive the failure
  const Run r = run_train(run_args(dir, kSmallModel,
                                   {"--epochs", "20", "--steps", "300", "--metrics", metrics.string(),
                                    "--checkpoint-dir", checkpoints.string(),
                                    "--checkpoint-every", "5"}));
  check_failed_on_full_disk(r, metrics);
  CHECK(r.output.find("done:") == std::string::npos);  // stopped at once, not at the end
  // Whole lines only, the steps numbered 1, 2, 3, ... (step_losses parses every line).
  const std::string text = slurp(metrics);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  const size_t steps = step_losses(metrics).size();
  CHECK(steps >= 10);
  CHECK(steps < 300);
  // The last checkpoint written before the failure stays, whole, at most 5 steps behind.
  const auto checkpoint = brigade::safetensors::read_file((checkpoints / "checkpoint.safetensors").string());
  const int64_t saved_step = std::stoll(checkpoint.metadata.at("step"));
  CHECK(saved_step % 5 == 0);
  CHECK(saved_step <= static_cast<int64_t>(steps));  // the failed step wrote no checkpoint
  CHECK(saved_step + 5 > static_cast<int64_t>(steps));
  CHECK(names_in(checkpoints) == std::vector<std::string>{"checkpoint.safetensors"});
}

TEST_CASE("full disk: --trace and --plot fail naming the file, and leave no file under its name") {
  const std::vector<std::string> names = {"trace.json", "trace.svg", "plot.svg"};
  for (const std::string& name : names) {
    CAPTURE(name);
    SmallDisk disk("picture", 64 << 10);
    if (!disk.mounted()) {
      MESSAGE("SKIP: " << disk.why());
      return;
    }
    disk.leave_free(4096);  // each picture of this run is larger than one block
    const fs::path dir = temp_dir("full-picture"), file = disk.path() / name;
    const Run r = run_train(run_args(dir, kSmallModel, {"--epochs", "1", "--microbatches", "4",
                                                        name == "plot.svg" ? "--plot" : "--trace",
                                                        file.string()}));
    check_failed_on_full_disk(r, file);
    CHECK(names_in(disk.path()).empty());  // neither the file nor its temporary
  }
}

TEST_CASE("full disk: --save fails naming the file; --save-initial's file stays whole") {
  SmallDisk disk("save", kTwoFilesDoNotFit);
  if (!disk.mounted()) {
    MESSAGE("SKIP: " << disk.why());
    return;
  }
  const fs::path dir = temp_dir("full-save");
  const fs::path initial = disk.path() / "init.safetensors", saved = disk.path() / "final.safetensors";
  const Run r = run_train(run_args(dir, kWideModel, {"--steps", "2", "--save-initial", initial.string(),
                                                     "--save", saved.string()}));
  check_failed_on_full_disk(r, saved);
  CHECK(names_in(disk.path()) == std::vector<std::string>{"init.safetensors"});
  CHECK(brigade::safetensors::read_file(initial.string()).find("dense_1.weight") != nullptr);
}

TEST_CASE("full disk: a checkpoint that does not fit fails naming it; the previous one stays") {
  // Room for two checkpoints, which the preflight asks of a run that saves more than once (the
  // second is written beside the first), and for --save-initial's file, counted apart: written
  // first, it leaves room for one checkpoint only.
  SmallDisk disk("checkpoint", kThreeFilesDoNotFit);
  if (!disk.mounted()) {
    MESSAGE("SKIP: " << disk.why());
    return;
  }
  const fs::path dir = temp_dir("full-checkpoint"), checkpoints = disk.path() / "ckpt";
  const fs::path checkpoint = checkpoints / "checkpoint.safetensors";
  const fs::path initial = disk.path() / "init.safetensors";
  // Step 1's checkpoint fits; step 2's is written beside it before replacing it, and cannot be.
  const Run r = run_train(run_args(dir, kWideModel,
                                   {"--steps", "3", "--checkpoint-dir", checkpoints.string(),
                                    "--checkpoint-every", "1", "--save-initial",
                                    initial.string()}));
  check_failed_on_full_disk(r, checkpoint);
  CHECK(names_in(disk.path()) ==
        std::vector<std::string>{"ckpt", "ckpt/checkpoint.safetensors", "init.safetensors"});
  CHECK(brigade::safetensors::read_file(checkpoint.string()).metadata.at("step") == "1");
}

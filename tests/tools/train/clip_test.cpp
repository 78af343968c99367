// brigade-train --clip-grad-norm, through the built binary: clipping by the norm over ALL
// stages gives a pipeline over two devices exactly one device's losses (both accumulate their
// micro-batches in order, and the norm adds the same per-parameter parts in the same order);
// it changes the training when the bound is below the norm and nothing when far above; a
// checkpoint remembers it, so a resume without it is refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// The small model, 4 micro-batches of 8 per step, 6 steps, SGD (its step is the gradient:
// clipping shows at once).
std::vector<std::string> run_args(const fs::path& dir, const std::string& devices,
                                  const std::string& metrics, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "192",
                                   "--batch", "32", "--devices", devices, "--microbatches", "4",
                                   "--steps", "6", "--optimizer", "sgd", "--lr", "0.5",
                                   "--threads-per-device", "1", "--metrics",
                                   (dir / metrics).string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<double> losses(const fs::path& dir, const std::string& devices,
                           const std::string& name, std::vector<std::string> extra) {
  const Run r = run_train(run_args(dir, devices, name, std::move(extra)));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::vector<double> out = step_losses(dir / name);
  REQUIRE(out.size() == 6);
  return out;
}

}  // namespace

TEST_CASE("clip: two devices clip by the norm over both stages, exactly as one device") {
  const fs::path dir = temp_dir("clip");
  const std::vector<double> plain = losses(dir, "cpu:0", "plain.jsonl", {});
  const std::vector<double> one = losses(dir, "cpu:0", "one.jsonl", {"--clip-grad-norm", "0.05"});
  const std::vector<double> two =
      losses(dir, "cpu:0,cpu:1", "two.jsonl", {"--schedule", "1f1b", "--clip-grad-norm", "0.05"});
  CHECK(two == one);
  // The first loss comes before any update; after it, a bound below the norm trains
  // otherwise, and a bound far above it changes no bit.
  CHECK(one.front() == plain.front());
  CHECK(one.back() != plain.back());
  CHECK(losses(dir, "cpu:0,cpu:1", "far.jsonl", {"--clip-grad-norm", "1e9"}) ==
        losses(dir, "cpu:0,cpu:1", "none.jsonl", {}));
}

TEST_CASE("clip: a checkpoint of a clipped run is not resumed without the clipping") {
  const fs::path dir = temp_dir("clip-resume");
  const std::string ckpt = (dir / "ckpt").string();
  Run r = run_train(run_args(dir, "cpu:0", "a.jsonl",
                             {"--clip-grad-norm", "0.05", "--checkpoint-dir", ckpt}));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  r = run_train(run_args(dir, "cpu:0", "b.jsonl", {"--checkpoint-dir", ckpt, "--resume"}));
  CHECK(r.status == 2);
  CHECK(r.output.find("clip_grad_norm: checkpoint 0.050000000000000003, this run (missing)") !=
        std::string::npos);
  r = run_train(run_args(dir, "cpu:0", "c.jsonl",
                         {"--clip-grad-norm", "0.1", "--checkpoint-dir", ckpt, "--resume"}));
  CHECK(r.status == 2);
  CHECK(r.output.find("clip_grad_norm: checkpoint 0.050000000000000003, this run 0.10000000000000001") !=
        std::string::npos);
}

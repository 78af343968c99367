// The smaller items of issue 20, each as the user met it: a value out of range said in words,
// --microbatches auto (as --help shows it), --init-from given a checkpoint, brigade-bench's
// models found from any directory and its GPU implementations refused without a GPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/device.h"
#include "tests/tools/train/run_binary.h"
#include "tools/train/options.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {
std::string usage_error(std::vector<const char*> args) {
  args.insert(args.begin(), "brigade-train");
  try {
    brigade::train::parse_options(static_cast<int>(args.size()), args.data());
  } catch (const brigade::train::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("small: a value out of range is said in words, not a 309-digit range") {
  CHECK(usage_error({"--lr", "-1"}) == "--lr: must be greater than 0, got -1 (see --help)");
  CHECK(usage_error({"--print-every", "0"}) ==
        "--print-every: must be greater than 0, got 0 (see --help)");
  CHECK(usage_error({"--steps", "-3"}) == "--steps: must be at least 0, got -3 (see --help)");
  CHECK(usage_error({"--optimizer", "sgd", "--momentum", "1"}) ==
        "--momentum: must be in [0, 1), got 1 (see --help)");
}

TEST_CASE("small: --microbatches auto, as --help shows it, is the default") {
  std::vector<const char*> args = {"brigade-train", "--microbatches", "auto"};
  CHECK(brigade::train::parse_options(3, args.data())->microbatches == 0);
  args = {"brigade-train", "--microbatches", "6"};
  CHECK(brigade::train::parse_options(3, args.data())->microbatches == 6);
  CHECK(usage_error({"--microbatches", "3x"}) == "--microbatches '3x': expected auto or a count");
  CHECK(usage_error({"--microbatches", "0"}) == "--microbatches 0: a step needs at least 1 micro-batch");
}

TEST_CASE("small: --init-from given a checkpoint points to --resume") {
  const fs::path dir = temp_dir("init-ckpt");
  const std::vector<std::string> base = {"--model", write_file(dir / "small.model", kSmallModel),
                                         "--data", "synthetic", "--synthetic-count", "64",
                                         "--batch", "32", "--devices", "cpu:0", "--steps", "1"};
  std::vector<std::string> first = base;
  first.insert(first.end(), {"--checkpoint-dir", (dir / "ckpt").string()});
  REQUIRE(run_train(first).status == 0);
  std::vector<std::string> again = base;
  again.insert(again.end(), {"--init-from", (dir / "ckpt" / "checkpoint.safetensors").string()});
  const Run r = run_train(again);
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("is a checkpoint (parameters, optimizer state, the step): to continue that "
                      "run, give --checkpoint-dir " + (dir / "ckpt").string() + " --resume") !=
        std::string::npos);
  CHECK(r.output.find("adam.m.") == std::string::npos);  // no list of mismatching tensors
}

TEST_CASE("small: brigade-bench finds models from any directory, refuses GPU kernels without a GPU") {
  const char* bench = std::getenv("BRIGADE_BENCH");
  REQUIRE_MESSAGE(bench != nullptr, "BRIGADE_BENCH is not set: run through meson test");
  // From /: a name that is no model, answered with the shipped ones (found through the
  // configured directory, not the working one).
  const Run unknown = run_command(std::string("cd / && ") + bench + " --model no_such_model");
  CAPTURE(unknown.output);
  CHECK(unknown.status == 2);
  CHECK(unknown.output.find("mlp, seed_cnn, tiny_cnn") != std::string::npos);
  if (brigade::cuda_device_count() > 0) return;  // the GPU kernels exist here
  const Run r = run_command(std::string(bench) + " --level ops --impls handwritten");
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("--impls handwritten needs a CUDA device, and this machine has none (" +
                      brigade::no_gpu_reason() + ";") != std::string::npos);
}

// `--model tiny_cnn.model`, the name as tools/models lists it, was read as a path in the
// working directory ("cannot open tiny_cnn.model"), though `--model tiny_cnn` was found.
TEST_CASE("small: a shipped model's file name finds it from any directory; a path does not") {
  const std::string run = "cd / && " + train_binary() +
                          " --data synthetic --synthetic-count 64 --batch 32 --steps 1 --model ";
  const Run by_file_name = run_command(run + "tiny_cnn.model");
  CAPTURE(by_file_name.output);
  CHECK(by_file_name.status == 0);
  CHECK(by_file_name.output.find("brigade-train: tiny_cnn.model (") != std::string::npos);
  // A path names that file, and no other: one that is missing is refused as missing.
  const Run by_path = run_command(run + "./tiny_cnn.model");
  CAPTURE(by_path.output);
  CHECK(by_path.status == 2);
  CHECK(by_path.output.find("cannot open model file './tiny_cnn.model': No such file") !=
        std::string::npos);
}

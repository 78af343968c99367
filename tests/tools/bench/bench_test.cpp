// brigade-bench (tools/bench/): --model names the model measured, a NAME or a FILE as in
// brigade-train; --level chooses what is measured. The built program, run as a user runs it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/device.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// The smallest measurement: one thread, one repetition of one step at batch 4.
const char* kQuick = " --quick --threads 1 --reps 1 --steps 1 --batches 4 --batch 4";

}  // namespace

TEST_CASE("bench: --model FILE measures that file's model, at the level asked") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path dir = temp_dir("bench-model");
  const fs::path model = fs::path(BRIGADE_MODELS_DIR) / "tiny_cnn.model";
  const fs::path json = dir / "bench.json";
  // From another directory: a path is a path, wherever the program runs.
  const Run r = run_command("cd " + dir.string() + " && " + bench + " --model " + model.string() +
                            " --level model" + kQuick + " --json " + json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Model level: training steps of " + model.string()) != std::string::npos);
  CHECK(r.output.find("Op level") == std::string::npos);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  CHECK(out["model_file"] == model.string());
  // One thread count, one batch: a row for the CPU, and on a machine with a GPU one for each
  // CUDA path (hand-written, cuBLAS/cuDNN) on cuda:0.
  REQUIRE(out["model"].size() == (brigade::cuda_device_count() > 0 ? 3u : 1u));
  for (const nlohmann::json& row : out["model"]) CHECK(row["batch"] == 4);
  CHECK_FALSE(out.contains("ops"));
  // 1.1 MFLOP per sample is tiny_cnn's, not the default seed_cnn's 113.4.
  CHECK(r.output.find("1.1 MFLOP per sample") != std::string::npos);

  const Run ops = run_command(bench + " --model tiny_cnn --level ops --impls cpu" + kQuick);
  CAPTURE(ops.output);
  REQUIRE(ops.status == 0);
  CHECK(ops.output.find("Op level") != std::string::npos);
  CHECK(ops.output.find("Model level") == std::string::npos);
  CHECK(ops.output.find("conv2d_2") != std::string::npos);  // tiny_cnn has two convolutions
  CHECK(ops.output.find("conv2d_3") == std::string::npos);
}

TEST_CASE("bench: the old switches are refused, and a model file that is no model exits 2") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  // --model takes a value now: the old "--model --batches 128" names no model.
  const Run old_switch = run_command(bench + " --model --batches 128");
  CAPTURE(old_switch.output);
  CHECK(old_switch.status == 2);
  CHECK(run_command(bench + " --network seed_cnn").status == 2);
  CHECK(run_command(bench + " --level everything").status == 2);

  const fs::path dir = temp_dir("bench-bad-model");
  const std::string bad = write_file(dir / "bad.model", "input 28x28x1\nconv2d filters=-3\n");
  const Run r = run_command(bench + " --model " + bad + kQuick);
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(bad + ":2:") != std::string::npos);  // file:line of the mistake
}

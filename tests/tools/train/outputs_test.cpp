// What a run writes besides progress: the metrics' fields, the trace in both formats, the
// parameter files, and an out-of-memory device reported by name. Under mpirun, and the ranks'
// reports behind it: outputs_mpirun_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "tests/tools/train/outputs_run.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

TEST_CASE("outputs: metrics lines, per device peak memory, evaluation, trace, parameters") {
  const fs::path dir = temp_dir("outputs");
  std::vector<double> first_step_accuracy;  // per run below: one device, then two
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const fs::path metrics = dir / "m.jsonl", svg = dir / "t.svg", json = dir / "t.json";
    Run r = run_train(quick_on(dir, devices,
                               {"--metrics", metrics.string(), "--trace", svg.string(), "--save",
                                (dir / "final.safetensors").string(), "--save-initial",
                                (dir / "init.safetensors").string()}));
    CAPTURE(r.output);
    REQUIRE(r.status == 0);
    std::ifstream in(metrics);
    int steps = 0, evals = 0;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["kind"] == "step") {
        ++steps;
        CHECK(j["step"] == steps);
        CHECK(j["epoch"] == 0);
        CHECK(j["samples_per_s"].get<double>() > 0);
        CHECK(j["peak_memory"].size() == (devices == "cpu:0" ? 1u : 2u));
        CHECK(j["peak_memory"]["cpu:0"].get<uint64_t>() > 0);
        // Right answers are counted on the last stage's micro-batches, one device or two.
        REQUIRE(j["accuracy"].is_number());
        CHECK(j["accuracy"].get<double>() >= 0);
        CHECK(j["accuracy"].get<double>() <= 1);
        if (steps == 1) first_step_accuracy.push_back(j["accuracy"].get<double>());
      } else {
        ++evals;
        CHECK(j["kind"] == "eval");
        CHECK(j["test_accuracy"].get<double>() >= 0);
        CHECK(j["test_accuracy"].get<double>() <= 1);
      }
    }
    CHECK(steps == 4);  // 128 samples / 32
    CHECK(evals == 1);  // the end of the epoch
    CHECK(slurp(svg).find("<svg") != std::string::npos);
    CHECK(r.output.find("measured bubble") != std::string::npos);

    r = run_train(quick_on(dir, devices, {"--steps", "1", "--trace", json.string()}));
    REQUIRE(r.status == 0);
    const nlohmann::json trace = nlohmann::json::parse(slurp(json));
    CHECK(trace.dump().find("\"ph\":\"X\"") != std::string::npos);

    // The parameter files: the model's tensors, and training changed them.
    const auto init = brigade::safetensors::read_file((dir / "init.safetensors").string());
    const auto final_ = brigade::safetensors::read_file((dir / "final.safetensors").string());
    REQUIRE(init.find("dense_1.weight") != nullptr);
    CHECK(init.find("dense_1.weight")->shape == std::vector<int64_t>{10, 144});
    CHECK(init.data != final_.data);

    // --init-from the initial parameters with another seed: the weights are the file's, so
    // --save-initial writes them back byte for byte.
    r = run_train(quick_on(dir, devices, {"--steps", "1", "--seed", "7", "--init-from",
                                          (dir / "init.safetensors").string(), "--save-initial",
                                          (dir / "again.safetensors").string()}));
    REQUIRE(r.status == 0);
    CHECK(brigade::safetensors::read_file((dir / "again.safetensors").string()).data == init.data);
  }
  // The first step scores the same initial parameters on the same samples with the same
  // dropout masks (keyed by the sample's place in the batch, not by the micro-batch): the
  // two devices' count, summed over micro-batches, is the one device's.
  REQUIRE(first_step_accuracy.size() == 2);
  CHECK(first_step_accuracy[1] == first_step_accuracy[0]);
}

TEST_CASE("outputs: a device too small for the model is refused with its name, and just above fits") {
  const fs::path dir = temp_dir("oom");
  for (const std::string devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    // Far too small: refused before the first step with the estimate (preflight.h).
    const Run refused =
        run_train(quick_on(dir, devices, {"--device-memory", "64KiB", "--steps", "1"}));
    CAPTURE(refused.output);
    CHECK(refused.status == 2);
    const std::string says = "would hold about ";
    const size_t at = refused.output.find(says);
    REQUIRE(at != std::string::npos);
    CHECK(refused.output.find("cpu:0 would hold") != std::string::npos);
    // The staging area's two slots of a step's images (2 x 32 x 784 floats) sit on cpu:0, and
    // of its labels (2 x 32 int32) on the last device: 200,704 B, and 256 B more on one device.
    CHECK(refused.output.find(devices == "cpu:0" ? "196.2 KiB of staged batches"
                                                 : "196.0 KiB of staged batches") !=
          std::string::npos);
    // Just above the estimate, the step fits: the estimate is the most a step holds (the
    // host thread runs at most one action ahead of a CPU device's stream, executor.cpp), so a
    // run the preflight passes does not run out of memory, whatever the machine's timing.
    std::istringstream estimate(refused.output.substr(at + says.size()));
    double value = 0;
    std::string unit;
    estimate >> value >> unit;  // "1.7 MiB"
    REQUIRE((unit == "KiB" || unit == "MiB"));
    // The printed estimate is rounded to a tenth of its unit: the most it can stand for.
    const double bytes = (value + 0.05) * (unit == "KiB" ? 1024.0 : 1048576.0);
    const std::string capacity = std::to_string(static_cast<int64_t>(bytes * 1.02));
    for (int attempt = 0; attempt < 3; ++attempt) {
      const Run r =
          run_train(quick_on(dir, devices, {"--device-memory", capacity, "--steps", "1"}));
      CAPTURE(r.output);
      CHECK(r.status == 0);
      CHECK(r.output.find("out of memory") == std::string::npos);
    }
  }
}

TEST_CASE("outputs: every schedule and every --balance runs and gives one device's losses") {
  const fs::path dir = temp_dir("schedules");
  const auto first_losses = [&](const std::string& devices, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--steps", "2", "--metrics", (dir / "m.jsonl").string()});
    const Run r = run_train(quick_on(dir, devices, extra));
    CAPTURE(r.output);
    REQUIRE(r.status == 0);
    std::vector<double> losses;
    std::ifstream in(dir / "m.jsonl");
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["kind"] == "step") losses.push_back(j["loss"].get<double>());
    }
    REQUIRE(losses.size() == 2);
    return losses;
  };
  const std::vector<double> plain = first_losses("cpu:0", {});
  const std::vector<std::vector<std::string>> runs = {
      {"--schedule", "naive", "--microbatches", "1"},
      {"--schedule", "gpipe", "--microbatches", "4"},
      {"--schedule", "1f1b", "--microbatches", "3", "--recompute"},
      {"--schedule", "interleaved-1f1b", "--chunks", "2", "--balance", "params", "--microbatches", "4"},
      {"--schedule", "looped-bfs", "--microbatches", "3"},
      {"--schedule", "zb-h1", "--microbatches", "4", "--balance", "time"},
      {"--schedule", "zb-auto", "--microbatches", "4", "--balance", "params"},
      {"--schedule", "1f1b", "--microbatches", "2", "--balance", "memory"},
      {"--schedule", "zb-h2", "--microbatches", "3"},
      {"--schedule", "interleaved-zb", "--microbatches", "3"},
      // The V shapes: device 0 holds the first and the last stage.
      {"--schedule", "zb-v", "--microbatches", "4"},
      {"--schedule", "v-half", "--microbatches", "3", "--balance", "params"},
      {"--schedule", "v-min", "--microbatches", "4"},
      {"--schedule", "dualpipe-v", "--microbatches", "4"},
      // Planned within one micro-batch per device: no two in flight anywhere.
      {"--schedule", "zb-auto", "--microbatches", "4", "--max-activations", "1"},
      // A bound per device: one micro-batch on cpu:0, two on cpu:1.
      {"--schedule", "zb-auto", "--microbatches", "4", "--max-activations", "1,2"},
      // Devices of different speeds: profiled, cut and planned for them; the same training.
      {"--schedule", "zb-auto", "--microbatches", "4", "--threads-per-device", "2,1",
       "--balance", "time"},
      {"--schedule", "1f1b", "--microbatches", "4", "--threads-per-device", "1,2",
       "--balance", "flops"}};
  for (const std::vector<std::string>& extra : runs) {
    CAPTURE(extra[1]);
    const std::vector<double> piped = first_losses("cpu:0,cpu:1", extra);
    for (size_t i = 0; i < plain.size(); ++i)
      CHECK(std::abs(piped[i] - plain[i]) <= 1e-5 * std::abs(plain[i]));
  }
}

// Two outputs naming one file were each written in turn, and the last one won: a checkpoint
// replaced by --save, a trace by the plot. An empty name was taken as no file at all. Each is
// refused before the first step, naming both flags (or the flag) and the file.
TEST_CASE("outputs: two outputs naming one file, or an empty name, are refused before the run") {
  const fs::path dir = temp_dir("same-file");
  const auto refused = [&](std::vector<std::string> flags, const std::string& says) {
    const Run r = run_train(quick_on(dir, "cpu:0", flags));
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(r.output.find("loss") == std::string::npos);  // no step ran
  };
  const std::string ckpt = (dir / "ckpt").string(), in_ckpt = ckpt + "/checkpoint.safetensors";
  refused({"--checkpoint-dir", ckpt, "--save", in_ckpt},
          "--save '" + in_ckpt + "' and --checkpoint-dir '" + ckpt + "' write the same file (" +
              in_ckpt + ")");
  const std::string json = (dir / "x.json").string(), svg = (dir / "s.svg").string();
  refused({"--metrics", json, "--trace", json},
          "--trace '" + json + "' and --metrics '" + json + "' write the same file");
  refused({"--trace", svg, "--plot", svg},
          "--trace '" + svg + "' and --plot '" + svg + "' write the same file");
  // The same file under another spelling.
  const std::string params = (dir / "p.safetensors").string();
  refused({"--save", params, "--metrics", (dir / "." / "p.safetensors").string()},
          "and --metrics '" + (dir / "." / "p.safetensors").string() +
              "' write the same file (" + params + ")");
  refused({"--save", params, "--save-initial", params}, "write the same file (" + params + ")");
  CHECK_FALSE(fs::exists(dir / "x.json"));
  CHECK_FALSE(fs::exists(ckpt));
  for (const char* flag : {"--save", "--save-initial", "--metrics", "--trace", "--plot",
                           "--checkpoint-dir", "--init-from", "--data-dir"})
    refused({flag, ""}, std::string(flag) + ": an empty ");
}

// --plot draws from the --metrics file, which holds a resumed run's earlier steps too; a device
// given as --metrics is not read back (it failed after the whole run: /dev/null held no steps),
// so the plot is the run's own, as without --metrics.
TEST_CASE("outputs: --plot with --metrics /dev/null draws the run, as without --metrics") {
  const fs::path dir = temp_dir("outputs-plot-device");
  const fs::path alone = dir / "alone.svg", beside = dir / "beside.svg";
  const Run a = run_train(quick_on(dir, "cpu:0", {"--steps", "2", "--plot", alone.string()}));
  CAPTURE(a.output);
  REQUIRE(a.status == 0);
  const Run b = run_train(quick_on(dir, "cpu:0", {"--steps", "2", "--plot", beside.string(),
                                                  "--metrics", "/dev/null"}));
  CAPTURE(b.output);
  REQUIRE(b.status == 0);
  CHECK(slurp(alone).find("<svg") != std::string::npos);
  CHECK(slurp(beside) == slurp(alone));
}

// Profiling the layers' times (--balance time; devices of different speeds) ran the whole
// model on each device, inside the --device-memory meant for its share of a step: a tight limit
// gave a bare "out of memory" from the profile instead of the memory check's refusal, with
// its estimate and what fits. A CPU device is now profiled on a twin of its threads.
TEST_CASE("outputs: --balance time or unlike devices within a tight --device-memory: the check") {
  const fs::path dir = temp_dir("oom-profiled");
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--balance", "time"},
        std::vector<std::string>{"--threads-per-device", "2,1"}}) {
    CAPTURE(how[0]);
    std::vector<std::string> extra = {"--device-memory", "64KiB", "--steps", "1"};
    extra.insert(extra.end(), how.begin(), how.end());
    const Run r = run_train(quick_on(dir, "cpu:0,cpu:1", extra));
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("would hold about ") != std::string::npos);
    CHECK(r.output.find("out of memory") == std::string::npos);
  }
}

// Where no batch or micro-batch count fits, the refusal says why, as the estimate has it: the
// parameters alone (with their gradients and optimizer state) where they exceed the device,
// else the smallest step's need, one sample per micro-batch. It used to blame the parameters
// whatever the cause (294 KiB of them beside 10 MiB, where a sample per micro-batch needs 18).
TEST_CASE("outputs: where nothing fits, the refusal names the parameters or the smallest step") {
  const std::string run = " --data synthetic --synthetic-count 240 --devices cpu:0,cpu:1,cpu:2"
                          " --steps 1 --batch 12 --device-memory ";
  const Run params = run_command(train_binary() + run + "200KiB");
  CAPTURE(params.output);
  CHECK(params.status == 2);
  CHECK(params.output.find("(the parameters alone are too large: cpu:0 would hold ") !=
        std::string::npos);
  const Run floor = run_command(train_binary() + run + "4MiB");
  CAPTURE(floor.output);
  CHECK(floor.status == 2);
  CHECK(floor.output.find("parameters alone") == std::string::npos);
  CHECK(floor.output.find("(not even one sample per micro-batch: --batch 6: cpu:0 would hold") !=
        std::string::npos);
}

#if defined(BRIGADE_CUDA_EMULATED)
namespace {
// A one-step run on one emulated GPU of a chosen memory (the child's own) on CUDA path `path`:
// at `small` refused before the run (status 2), the refusal naming `counted`; at `enough` it
// runs, never out of memory.
void check_kept_workspace_counted(const std::string& dir_name, const std::string& path,
                                  const std::string& small_memory, const std::string& counted,
                                  const std::string& enough_memory) {
  const fs::path dir = temp_dir(dir_name);
  const std::vector<std::string> args = quick_on(dir, "cuda:0", {"--steps", "1"});
  const auto on_gpu_of = [&](const std::string& memory) {
    return run_command("BRIGADE_EMULATED_GPUS=1 BRIGADE_CUDA_PATH=" + path +
                       " BRIGADE_EMULATED_GPU_MEMORY=" + memory + " " + train_command(args));
  };
  const Run small = on_gpu_of(small_memory);
  CAPTURE(small.output);
  CHECK(small.status == 2);
  CHECK(small.output.find(counted) != std::string::npos);
  const Run enough = on_gpu_of(enough_memory);
  CAPTURE(enough.output);
  CHECK(enough.status == 0);
  CHECK(enough.output.find("out of memory") == std::string::npos);
}
}  // namespace

// On the cuBLAS/cuDNN path a stream that runs a Dense layer keeps 32 MiB of cuBLAS workspace,
// and an evaluation runs on the GPU's default stream, which keeps its own: the memory check
// counts both, so a GPU too small for them is refused before the run, with what fits said,
// where the run it passed used to fail at its first Dense layer (exit 1, "out of memory
// allocating 32.0 MiB").
TEST_CASE("outputs: on a GPU, the memory check counts cuBLAS's workspace: what it passes runs") {
  check_kept_workspace_counted("oom-cublas", "vendor", "60MiB", "64.0 MiB of cuBLAS workspace",
                               "80MiB");
}

// The same on the hand-written path, whose GEMMs split a deep K across blocks (a conv's filter
// gradient, a narrow Dense): a stream keeps 8 MiB of split-K scratch from its first split
// launch, uncounted until now, so a 12 MiB GPU passed the check (1.1 MiB) and ran out of
// memory at the first evaluation (exit 1).
TEST_CASE("outputs: on a GPU, the memory check counts the split-K scratch: what it passes runs") {
  check_kept_workspace_counted("oom-split-k", "handwritten", "12MiB",
                               "16.0 MiB of split-K scratch", "20MiB");
}

// A hand-written convolution lowers its input into im2col's columns, the step's largest tensor
// for the question's network: 81 MiB for conv2d_2 at batch 128, once uncounted, so a 120 MiB
// GPU passed the check (82.3 MiB) and ran out of memory at the first forward (exit 1). Counted
// now: refused, and the command it suggests (the columns of smaller micro-batches) runs.
// (Its name leaves out "GPU": it sets its GPU itself, so the GPU matrix's runs would repeat it.)
TEST_CASE("outputs: the memory check counts a hand-written conv's im2col columns; its fix runs") {
  const std::string gpu = "BRIGADE_EMULATED_GPUS=1 BRIGADE_CUDA_PATH=handwritten "
                          "BRIGADE_EMULATED_GPU_MEMORY=120MiB ";
  const Run r = run_command(gpu + train_command({"--data", "synthetic", "--synthetic-count", "128",
                                                 "--batch", "128", "--devices", "cuda:0",
                                                 "--steps", "1"}));
  CAPTURE(r.output);
  REQUIRE(r.status == 2);
  CHECK(r.output.find("81.0 MiB of a convolution's im2col columns") != std::string::npos);
  const std::string fix = command_after(r.output, "it fits:");
  REQUIRE(fix.find("--microbatches ") != std::string::npos);
  const Run fits = run_command(gpu + fix);
  CAPTURE(fits.output);
  CHECK(fits.status == 0);
  CHECK(fits.output.find("out of memory") == std::string::npos);
}
#endif


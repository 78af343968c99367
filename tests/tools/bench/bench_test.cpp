// brigade-bench (tools/bench/): --model names the model measured, a NAME or a FILE as in
// brigade-train; --level chooses what is measured. The built program, run as a user runs it.
// What it refuses is bench_refusals_test.cpp's.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/device.h"
#include "tests/tools/bench/bench_run.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::bench::test;
using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// Whether a command after kOneGpu has a GPU to run on.
bool gpu_here() { return !kOneGpu.empty() || brigade::cuda_device_count() > 0; }

}  // namespace

TEST_CASE("bench: --model FILE measures that file's model, at the level asked") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path dir = temp_dir("bench-model");
  const fs::path model = fs::path(BRIGADE_MODELS_DIR) / "tiny_cnn.model";
  const fs::path json = dir / "bench.json";
  // From another directory: a path is a path, wherever the program runs.
  const Run r = run_command("cd " + dir.string() + " && " + bench + " --model " + model.string() +
                            " --level model" + kQuickSteps + " --json " + json.string());
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

  const Run ops = run_command(bench + " --model tiny_cnn --level ops --impls cpu" + kQuickOps);
  CAPTURE(ops.output);
  REQUIRE(ops.status == 0);
  CHECK(ops.output.find("Op level") != std::string::npos);
  CHECK(ops.output.find("Model level") == std::string::npos);
  CHECK(ops.output.find("conv2d_2") != std::string::npos);  // tiny_cnn has two convolutions
  CHECK(ops.output.find("conv2d_3") == std::string::npos);
}

TEST_CASE("bench: --level gemm times the bf16 GEMM beside SGEMM at each GEMM of the layers") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path json = temp_dir("bench-gemm") / "gemm.json";
  const Run r = run_command(bench + " --model tiny_cnn --level gemm" + kQuickOps + " --json " +
                            json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("GEMM level: bf16") != std::string::npos);
  CHECK(r.output.find("Op level") == std::string::npos);
  CHECK(r.output.find("Model level") == std::string::npos);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  // tiny_cnn (its .model's comment) at batch 4: three GEMMs for each of its two convolutions
  // and its dense layer. conv2d_1's forward: 8 filters x (4·26·26 columns) x (1·3·3 deep);
  // conv2d_2's backward-filter: 16 x (8·3·3) x (4·11·11); the dense forward: 4 x 10 x 400.
  REQUIRE(out["gemm"].size() == 9u);
  auto shape = [&](size_t i) {
    const nlohmann::json& g = out["gemm"][i];
    return g["layout"].get<std::string>() + " " + std::to_string(g["M"].get<int64_t>()) + " " +
           std::to_string(g["N"].get<int64_t>()) + " " + std::to_string(g["K"].get<int64_t>());
  };
  CHECK(shape(0) == "NN 8 2704 9");
  CHECK(shape(5) == "NT 16 72 484");
  CHECK(shape(6) == "NT 4 10 400");
  for (const nlohmann::json& g : out["gemm"]) {
    CHECK(g["sgemm_ms"].get<double>() > 0);
    CHECK(g["bf16_ms"].get<double>() > 0);
  }
}

// A row a schedule cannot make at one m says so in the table, and every row's xnaive is
// against naive at its m, measured first whatever the order asked (a row before naive read
// 0.00 there, and a table without naive 0.00 in every row).
TEST_CASE("bench: brigade-bench-pipeline's rows: skipped ones said, xnaive against naive") {
  const std::string bench = tool_binary("BRIGADE_BENCH_PIPELINE") +
                            " --model tiny_cnn --batch 8 --microbatches 2 --steps 1";
  const Run r = run_command(bench + " --schedules 1f1b,dualpipe-v,naive");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const size_t naive = r.output.find("\nnaive               2    no "),
               one_f_one_b = r.output.find("\n1f1b                2    no ");
  REQUIRE(naive != std::string::npos);
  REQUIRE(one_f_one_b != std::string::npos);
  CHECK(naive < one_f_one_b);
  CHECK(r.output.find("\ndualpipe-v          2 skipped: dualpipe-v: needs at least 2p = 4 "
                      "micro-batches") != std::string::npos);
  // naive against itself: 1.00; 1f1b's xnaive is its samples/s over naive's.
  const auto field = [&](size_t at, int column) {  // the row's whitespace-separated fields
    std::istringstream row(r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1));
    std::string word;
    for (int i = 0; i <= column; ++i) row >> word;
    return std::stod(word);
  };
  CHECK(field(naive, 4) == 1.0);
  CHECK(field(one_f_one_b, 4) == doctest::Approx(field(one_f_one_b, 3) / field(naive, 3))
                                     .epsilon(0.01));
  const Run alone = run_command(bench + " --schedules 1f1b");
  CAPTURE(alone.output);
  REQUIRE(alone.status == 0);
  CHECK(alone.output.find("\n1f1b                2    no ") != std::string::npos);
  CHECK(alone.output.find("      -   ") != std::string::npos);  // no naive: no ratio
}

// --count-calls reads the emulated CUDA runtime's counts (kernels/emu/cudart/README.md,
// "Counting calls"): on emulated GPUs it prints them per step, elsewhere it says in one line
// that it needs them, and exits 2 — never an empty table.
TEST_CASE("bench: --count-calls counts a GPU step's calls on emulated GPUs, and says so elsewhere") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path dir = temp_dir("bench-count-calls");
  const fs::path json = dir / "calls.json";
#if defined(BRIGADE_CUDA_EMULATED)
  const std::string gpus = "BRIGADE_EMULATED_GPUS=1 ";  // whatever the environment says
#else
  const std::string gpus;
#endif
  const Run r = run_command(gpus + bench + " --model tiny_cnn --devices cuda:0 --count-calls" +
                            " --batches 4 --json " + json.string());
  CAPTURE(r.output);
#if defined(BRIGADE_CUDA_EMULATED)
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Calls per training step of tiny_cnn") != std::string::npos);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  REQUIRE(out["calls"].size() == 2u);  // the hand-written path and the vendor path, on cuda:0
  for (const nlohmann::json& row : out["calls"]) {
    CAPTURE(row.dump());
    CHECK(row["device"] == "cuda:0");
    CHECK(row["batch"] == 4);
    // --cuda-graphs on, the default: the one stage's F, its BW and its update, replayed as
    // graphs (pipeline/runtime/device_graphs.h), and nothing launched besides.
    CHECK(row["graph_launches"] == 3);
    CHECK(row["kernel_launches"] == 0);
    CHECK(row["library_calls"] == 0);
    CHECK(row["host_blocking"].get<double>() >= 1);  // the wait for the step before
  }
  // --cuda-graphs off: every launch issued by the host.
  const fs::path json_off = dir / "calls-off.json";
  const Run off = run_command(gpus + bench + " --model tiny_cnn --devices cuda:0 --count-calls" +
                              " --batches 4 --cuda-graphs off --json " + json_off.string());
  CAPTURE(off.output);
  REQUIRE(off.status == 0);
  std::ifstream in_off(json_off);
  const nlohmann::json calls_off = nlohmann::json::parse(in_off)["calls"];
  REQUIRE(calls_off.size() == 2u);
  for (const nlohmann::json& row : calls_off) {
    CAPTURE(row.dump());
    CHECK(row["cuda_graphs"] == false);
    CHECK(row["graph_launches"] == 0);
    CHECK(row["kernel_launches"].get<double>() > 0);  // the optimizer's, at least
    // The top entry points include every launch, by the name <<<>>> compiles to.
    CHECK(row["top_entry_points"]["cudaLaunchKernel"] == row["kernel_launches"]);
    // The hand-written kernels call no library; the vendor path's convolutions are cuDNN's.
    if (row["impl"] == "handwritten") CHECK(row["library_calls"] == 0);
    if (row["impl"] == "vendor") CHECK(row["library_calls"].get<double>() > 0);
  }
  // A CPU device has no CUDA calls to count.
  const Run cpu = run_command(bench + " --model tiny_cnn --devices cpu:0 --count-calls");
  CAPTURE(cpu.output);
  CHECK(cpu.status == 2);
  CHECK(cpu.output.find("--devices names cpu:0") != std::string::npos);
  // --precision fp32,bf16: one pass each, the rows named by their precision; bf16's GEMMs
  // and convolutions are library calls one for one with fp32's (cublasGemmEx for SGEMM),
  // counted with graphs off, where the host makes them.
  const fs::path json_prec = dir / "calls-prec.json";
  const Run prec = run_command(gpus + bench + " --model tiny_cnn --devices cuda:0 --count-calls" +
                               " --batches 4 --impls vendor --precision fp32,bf16 --cuda-graphs off"
                               " --json " +
                               json_prec.string());
  CAPTURE(prec.output);
  REQUIRE(prec.status == 0);
  std::ifstream in_prec(json_prec);
  const nlohmann::json calls_prec = nlohmann::json::parse(in_prec)["calls"];
  REQUIRE(calls_prec.size() == 2u);
  CHECK(calls_prec[0]["precision"] == "fp32");
  CHECK(calls_prec[1]["precision"] == "bf16");
  CHECK(calls_prec[0]["library_calls"].get<double>() > 0);
  CHECK(calls_prec[1]["library_calls"] == calls_prec[0]["library_calls"]);
  // Emulated GPUs set up wrong: the refusal names the variable (it said only
  // cudaErrorInitializationError), and --impls vendor is --count-calls' to refuse, not the op
  // level's, whose suggested --impls reference,cpu --count-calls refused.
  const Run wrong = run_command("BRIGADE_EMULATED_GPUS=abc " + bench +
                                " --model tiny_cnn --count-calls --batches 4 --impls vendor");
  CAPTURE(wrong.output);
  CHECK(wrong.status == 2);
  CHECK(wrong.output.find("BRIGADE_EMULATED_GPUS=\"abc\"") != std::string::npos);
  CHECK(wrong.output.find("here: --impls reference,cpu") == std::string::npos);
#else
  CHECK(r.status == 2);
  CHECK(r.output.find("--count-calls needs a build on emulated GPUs") != std::string::npos);
  CHECK_FALSE(fs::exists(json));
#endif
  // --devices chooses what --count-calls counts; alone it is a mistake on the command line.
  const Run alone = run_command(bench + " --devices cuda:0");
  CAPTURE(alone.output);
  CHECK(alone.status == 2);
  CHECK(alone.output.find("--count-calls") != std::string::npos);
}

// --math tf32 (kernels/math_mode.h) times the vendor rows on tensor cores: on a GPU (emulated
// ones here) the run says so in its JSON; where it cannot run, one line and exit 2.
TEST_CASE("bench: --math tf32 times the vendor rows on a GPU, and is refused without one") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const auto refused = [&](const std::string& line, const std::string& says) {
    const Run r = run_command(line);
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("brigade-bench: --math tf32: ") != std::string::npos);
    CHECK(r.output.find(says) != std::string::npos);
  };
  refused(bench + " --math tf32 --count-calls",
          "--count-calls counts the same calls in either math mode");
#if defined(BRIGADE_CUDA_EMULATED)
  const std::string one_gpu = "BRIGADE_EMULATED_GPUS=1 ", no_gpu = "BRIGADE_EMULATED_GPUS=0 ";
#else
  const std::string one_gpu, no_gpu;
#endif
  if (brigade::cuda_device_count() == 0 || !no_gpu.empty())
    refused(no_gpu + bench + " --math tf32" + kQuick, "this machine has no GPU");
  if (brigade::cuda_device_count() == 0 && one_gpu.empty()) return;  // no GPU to time on
  refused(one_gpu + bench + " --level ops --impls cpu,handwritten --math tf32" + kQuickOps,
          "--impls measures none: add vendor");
  const fs::path json = temp_dir("bench-tf32") / "bench.json";
  const Run r = run_command(one_gpu + bench + " --model tiny_cnn --level model --math tf32" +
                            kQuickSteps + " --json " + json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("math tf32 (the vendor rows and the GPU peak)") != std::string::npos);
  CHECK(r.output.find("math tf32: forward algorithm") != std::string::npos);  // cuDNN's choice
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  CHECK(out["math"] == "tf32");
  CHECK(out["model"].size() == 3u);  // cpu, then the two CUDA paths: the CPU row still runs
}

// --precision bf16 times the cpu rows and, on a GPU, both CUDA paths' (the hand-written
// tensor-core GEMM, cuBLAS's bf16 GEMM on tensor cores).
TEST_CASE("bench: --precision bf16 times the cpu rows and both CUDA paths' on a GPU") {
#if defined(BRIGADE_CUDA_EMULATED)
  const std::string one_gpu = "BRIGADE_EMULATED_GPUS=1 ";
#else
  const std::string one_gpu;
  if (brigade::cuda_device_count() == 0) return;  // no GPU to time on
#endif
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path json = temp_dir("bench-bf16") / "bench.json";
  const Run r = run_command(one_gpu + bench + " --model tiny_cnn --level model --precision bf16" +
                            kQuickSteps + " --json " + json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  REQUIRE(out["model"].size() == 3u);
  CHECK(out["model"][0]["impl"] == "cpu");
  CHECK(out["model"][1]["impl"] == "handwritten");
  CHECK(out["model"][2]["impl"] == "vendor");
  for (const nlohmann::json& row : out["model"]) CHECK(row["precision"] == "bf16");
}

// --level runtime: the step brigade-train runs (one stage through the pipeline runtime), a row
// per CPU thread count and batch, and on a GPU per CUDA path and graphs setting; --level takes
// several levels at once.
TEST_CASE("bench: --level runtime times brigade-train's step, with CUDA graphs on and off") {
#if defined(BRIGADE_CUDA_EMULATED)
  const std::string one_gpu = "BRIGADE_EMULATED_GPUS=1 ";
  const bool gpu = true;
#else
  const std::string one_gpu;
  const bool gpu = brigade::cuda_device_count() > 0;
#endif
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path json = temp_dir("bench-runtime") / "bench.json";
  const Run r = run_command(one_gpu + bench + " --model tiny_cnn --level model,runtime" +
                            " --cuda-graphs on,off" + kQuickSteps + " --json " + json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("Model level: training steps of tiny_cnn") != std::string::npos);
  CHECK(r.output.find("Runtime level: training steps of tiny_cnn through the pipeline runtime") !=
        std::string::npos);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  CHECK(out["model"].size() == (gpu ? 3u : 1u));
  const nlohmann::json& rows = out["runtime"];
  // cpu:0 on one thread; then each CUDA path with graphs on, then off.
  REQUIRE(rows.size() == (gpu ? 5u : 1u));
  CHECK(rows[0]["device"] == "cpu:0");
  CHECK(rows[0]["cuda_graphs"].is_null());  // no graphs on a CPU device
  for (size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(rows[i]["device"] == "cuda:0");
    CHECK(rows[i]["impl"] == (i <= 2 ? "handwritten" : "vendor"));
    CHECK(rows[i]["cuda_graphs"] == (i % 2 == 1));
  }
  for (const nlohmann::json& row : rows) {
    CAPTURE(row.dump());
    CHECK(row["batch"] == 4);
    const double samples_per_s = row["samples_per_s"], step_ms = row["step_ms"];
    CHECK(samples_per_s * step_ms == doctest::Approx(4 * 1e3));
    // The peak of a step's memory in use: some, and within what the allocator holds.
    CHECK(row["peak_bytes"].get<uint64_t>() > 0);
    CHECK(row["peak_bytes"].get<uint64_t>() <= row["reserved_bytes"].get<uint64_t>());
  }
  // --cuda-graphs off alone: no row with graphs.
  if (gpu) {
    const Run off = run_command(one_gpu + bench + " --model tiny_cnn --level runtime" +
                                " --cuda-graphs off" + kQuickSteps + " --json " + json.string());
    CAPTURE(off.output);
    REQUIRE(off.status == 0);
    std::ifstream in_off(json);
    const nlohmann::json rows_off = nlohmann::json::parse(in_off)["runtime"];
    REQUIRE(rows_off.size() == 3u);
    CHECK(rows_off[1]["cuda_graphs"] == false);
    CHECK(rows_off[2]["cuda_graphs"] == false);
  }
}

// A part of a level that fails on a GPU (here the vendor path, whose 32 MiB cuBLAS workspace
// does not fit an emulated GPU of 24 MiB, where the hand-written path fits: the 8 MiB split-K
// scratch of each of the two levels' streams) is said and left out; the other parts are still
// measured and written, and the exit status says that something failed.
TEST_CASE("bench: a path that fails is reported and left out; the rest is measured") {
#if defined(BRIGADE_CUDA_EMULATED)
  const std::string bench = tool_binary("BRIGADE_BENCH");
  const fs::path json = temp_dir("bench-failed-part") / "bench.json";
  const Run r = run_command("BRIGADE_EMULATED_GPUS=1 BRIGADE_EMULATED_GPU_MEMORY=24MiB " + bench +
                            " --model tiny_cnn --level model,runtime" + kQuickSteps + " --json " +
                            json.string());
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("part(s) failed, the rest measured") != std::string::npos);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  for (const char* level : {"model", "runtime"}) {
    CAPTURE(level);
    REQUIRE(out[level].size() == 2u);  // the CPU's row and the hand-written path's
    CHECK(out[level][0]["impl"] == "cpu");
    CHECK(out[level][1]["impl"] == "handwritten");
  }
  bool model_vendor = false, runtime_vendor = false;
  for (const nlohmann::json& failure : out["failures"]) {
    const std::string f = failure;
    model_vendor = model_vendor || f.rfind("model level, vendor, fp32: ", 0) == 0;
    runtime_vendor = runtime_vendor || f.rfind("runtime level, vendor, fp32: ", 0) == 0;
    CHECK(f.find("out of memory") != std::string::npos);
  }
  CHECK(model_vendor);
  CHECK(runtime_vendor);
#else
  MESSAGE("an emulated GPU of 1 MiB needs the emulated build");
#endif
}


// Where an option means something for the run, it is honoured: --steps sets the steps
// --count-calls counts (it counted 2 whatever was asked), and --impls picks the model and
// runtime levels' rows as it picks the op level's (it picked only those: --level model
// --impls cpu timed both CUDA paths too on a GPU).
TEST_CASE("bench: --steps with --count-calls, and --impls at the model and runtime levels") {
  const std::string bench = kOneGpu + tool_binary("BRIGADE_BENCH") + " --model tiny_cnn";
  const bool gpu = gpu_here();
#if defined(BRIGADE_CUDA_EMULATED)
  const Run counted = run_command(bench + " --count-calls --batches 4 --impls vendor" +
                                  " --cuda-graphs off --steps 3");
  CAPTURE(counted.output);
  REQUIRE(counted.status == 0);
  CHECK(counted.output.find("the mean of 3 steps after 2 warm-up") != std::string::npos);
#endif
  const fs::path json = temp_dir("bench-impls-levels") / "bench.json";
  // (Without a GPU, --impls vendor is refused: it would time nothing.)
  const Run r = run_command(bench + " --level model,runtime --cuda-graphs off" +
                            " --impls " + (gpu ? "cpu,vendor" : "cpu") + kQuickSteps + " --json " +
                            json.string());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(json);
  const nlohmann::json out = nlohmann::json::parse(in);
  for (const char* level : {"model", "runtime"}) {
    CAPTURE(level);
    REQUIRE(out[level].size() == (gpu ? 2u : 1u));  // no hand-written row
    CHECK(out[level][0]["impl"] == "cpu");
    if (gpu) CHECK(out[level][1]["impl"] == "vendor");
  }
}

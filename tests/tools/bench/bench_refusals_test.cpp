// brigade-bench and brigade-bench-pipeline (tools/bench/): what they refuse, exit 2, before
// measuring anything: the old switches, a model file that is no model, counts a pipeline cannot
// run, an option given where no level reads it. What they measure is bench_test.cpp's.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "tests/tools/bench/bench_run.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::bench::test;
using namespace brigade::train::test;
namespace fs = std::filesystem;

TEST_CASE("bench: the old switches are refused, and a model file that is no model exits 2") {
  const std::string bench = tool_binary("BRIGADE_BENCH");
  // --model takes a value now: the old "--model --batches 128" names no model.
  const Run old_switch = run_command(bench + " --model --batches 128");
  CAPTURE(old_switch.output);
  CHECK(old_switch.status == 2);
  CHECK(run_command(bench + " --network seed_cnn").status == 2);
  CHECK(run_command(bench + " --level everything").status == 2);
  // --cuda-graphs is the runtime's: with a level that runs no runtime it would mean nothing.
  const Run graphs = run_command(bench + " --level model --cuda-graphs off" + kQuickSteps);
  CAPTURE(graphs.output);
  CHECK(graphs.status == 2);
  CHECK(graphs.output.find("--cuda-graphs applies to the runtime level") != std::string::npos);

  const fs::path dir = temp_dir("bench-bad-model");
  const std::string bad = write_file(dir / "bad.model", "input 28x28x1\nconv2d filters=-3\n");
  const Run r = run_command(bench + " --model " + bad + kQuick);
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(bad + ":2:") != std::string::npos);  // file:line of the mistake
}

// Once a division by zero (--microbatches 0) or micro-batches of no sample (more than --batch),
// and a negative --train taken as "measure": each is refused with exit status 2, by its name.
TEST_CASE("bench: brigade-bench-pipeline refuses micro-batch and step counts it cannot run") {
  const std::string bench = tool_binary("BRIGADE_BENCH_PIPELINE");
  // Schedules, device counts and flags it cannot run: refused before any layer is profiled
  // (they were found after it, exit 1, or never: a table of no row, a --trace not written).
  const std::pair<std::string, std::string> refused[] = {
      {" --microbatches 0", "--microbatches"},
      {" --train -1", "--train"},
      {" --batch 8 --microbatches 4,16", "--microbatches 16 is more than the --batch 8 samples"},
      {" --schedules 1f1b,nosuch", "--schedules: unknown schedule 'nosuch'; known: naive"},
      {" --model tiny_cnn --devices 8", "--schedules naive on --devices 8: 8 stages, but the "
                                        "model has 6 layers"},
      {" --model tiny_cnn --microbatches 3 --schedules interleaved-1f1b",
       "no schedule of --schedules runs at any --microbatches count (interleaved-1f1b: "
       "micro-batches must be a multiple of the devices"},
      {" --trace t", "--trace is for --train N"},
      {" --train 0 --trace t", "--trace is for --train N"}};
  for (const auto& [args, says] : refused) {
    const std::string line = bench + args;  // (clang's lambdas do not capture a binding)
    CAPTURE(line);
    const Run r = run_command(line);
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(r.output.find("stages by profiled time") == std::string::npos);  // before profiling
  }
}

// An option a run does not read was once dropped without a word: --count-calls took --level,
// --threads, --reps and --batch and counted as without them, --level gemm took --impls and
// --precision and timed its two GEMMs, and a level's size (--batch, --batches, --steps) given
// where no level asked for reads it changed nothing. Each is refused now, by name, before
// anything runs (the same in every build: --count-calls' own refusals come after), exit 2.
TEST_CASE("bench: an option the run would not read is refused by name, exit 2") {
  const std::string bench = tool_binary("BRIGADE_BENCH") + " --model tiny_cnn";
  // (A quick count where the old program counted: the vendor path alone, at batch 4.)
  const std::string count = " --count-calls --batches 4 --impls vendor --cuda-graphs off";
  const struct {
    std::string args, says;
  } refused[] = {
      {count + " --level model", "--level chooses what is timed"},
      {count + " --threads 1", "--threads sets the CPU's thread counts"},
      {count + " --reps 1", "--reps repeats a timing"},
      {count + " --batch 4", "--batch is the op and gemm levels' batch"},
      {" --level gemm --impls cpu" + kQuickOps, "--impls cpu: --level gemm times"},
      {" --level model --impls reference,cpu" + kQuickSteps,
       "--impls reference: the reference kernels are timed op by op"},
      {" --level both --impls reference" + kQuick,
       "--impls reference: the model and runtime levels time steps on cpu"},
      {" --level ops --impls cpu --steps 1" + kQuickOps, "--steps are the model and runtime"},
      {" --level gemm --batches 4" + kQuickOps, "--batches are the model and runtime"},
      {" --level model --batch 4" + kQuickSteps, "--batch is the ops and gemm levels' batch"},
      {" --level gemm --precision bf16" + kQuickOps, "--precision is the ops, model and runtime"},
  };
  for (const auto& r : refused) {
    const std::string line = kOneGpu + bench + r.args;
    CAPTURE(line);
    const Run run = run_command(line);
    CAPTURE(run.output);
    CHECK(run.status == 2);
    CHECK(run.output.find("brigade-bench: " + r.says) != std::string::npos);
    CHECK(run.output.find("level:") == std::string::npos);  // nothing was measured
    CHECK(run.output.find("Calls per training step") == std::string::npos);
  }
}

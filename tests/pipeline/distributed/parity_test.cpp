// brigade-train --distributed under mpirun against the same training in one process: the
// parameters it saves (--save, gathered on rank 0) after a few steps of a small model on
// synthetic data, for 2 and 3 ranks (one per stage), 2 ranks running 2 or 3 interleaved
// stages each or a V, clipping by the global norm, bf16, and 2 stages x 2 replicas; the exact
// resume of a distributed checkpoint; and on GPUs, NCCL's links and reducer against one
// process and against CPU ranks. (What a failing job does: failure_test.cpp.)
//
// Bit-exact or 1e-5: one rank per stage runs the very actions of the one-process pipeline
// (the same schedule, micro-batches, dropout masks, accumulation order), so its parameters
// are bit-identical. Two replicas each accumulate their 4 micro-batches and the all-reduce
// adds the two sums; one process with 8 micro-batches keeps one running sum — the same
// additions in another order, so within 1e-5 relative (and the replicas stay identical).
//
// The test is an ordinary program that runs mpirun itself (BRIGADE_MPIRUN, BRIGADE_TRAIN from
// meson), under `timeout`, so a hang becomes a failure.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "tests/pipeline/distributed/dist_train_support.h"
#include "tests/tools/train/metrics_file.h"

namespace {

using namespace brigade::distributed::test;

TEST_CASE("2 and 3 ranks, and 2 ranks of 2 or 3 interleaved stages, save what one process saves") {
  const fs::path dir = temp_dir("ranks");
  struct Case {
    const char* name;
    int ranks;
    std::vector<std::string> schedule;
  };
  const auto interleaved = [](int chunks) {
    return std::vector<std::string>{"--schedule", "interleaved-1f1b", "--chunks",
                                    std::to_string(chunks), "--balance", "params"};
  };
  // 3 stages per rank: 6 link numbers between the two ranks, beyond the 4 that an earlier
  // tag layout left (pipeline/distributed/link_tags.h says why).
  // Clipping by the global norm: each rank holds a part of the norm, and 0.05 clips every step
  // of this recipe, so a rank that clipped by its own part would scale by another factor. With
  // SGD, whose updates that factor scales directly (Adam's would all but cancel it). A V:
  // rank 0 runs the first and the last stage.
  const std::vector<std::string> clip = {"--clip-grad-norm", "0.05", "--optimizer", "sgd",
                                         "--lr", "0.1"};
  const std::vector<std::string> vee = {"--schedule", "zb-v", "--balance", "params"};
  // bf16 (kernels/precision.h): activations and gradients cross the MPI links in bfloat16,
  // as they cross between one process's devices; both bit for bit what one device computes.
  const std::vector<std::string> bf16 = {"--precision", "bf16"};
  for (const Case& c : {Case{"2", 2, {}}, Case{"3", 3, {}}, Case{"2x2", 2, interleaved(2)},
                        Case{"2x3", 2, interleaved(3)}, Case{"3-clip", 3, clip},
                        Case{"2x2-clip", 2, with(interleaved(2), clip)}, Case{"2-zb-v", 2, vee},
                        Case{"3-bf16", 3, bf16}}) {
    CAPTURE(c.name);
    const auto base = with(recipe(dir, 4), c.schedule);
    std::string devices;
    for (int d = 0; d < c.ranks; ++d) devices += (d ? ",cpu:" : "cpu:") + std::to_string(d);
    const std::string name = c.name;
    const fs::path one = dir / ("one-" + name + ".safetensors");
    const fs::path many = dir / ("mpi-" + name + ".safetensors");
    const Run single = train(with(base, {"--devices", devices, "--save", one.string()}));
    REQUIRE_MESSAGE(single.status == 0, single.output);
    const Run run = train_mpi(c.ranks, with(base, {"--distributed", "--save", many.string()}));
    REQUIRE_MESSAGE(run.status == 0, run.output);
    // Rank 0 alone reports: one start line, one evaluation.
    CHECK_MESSAGE(count(run.output, "brigade-train: ") == 1, run.output);
    CHECK(count(run.output, "test accuracy") == 1);
    CHECK(run.output.find(std::to_string(c.ranks) + " ranks x 1 replica") != std::string::npos);
    // Rank 0 runs the first stage of the one replica: the runtime takes the staged batch.
    CHECK_MESSAGE(run.output.find("staged on the stages' devices") != std::string::npos, run.output);
    check_same(many, one, /*exact=*/true);
  }
}

TEST_CASE("2 stages x 2 replicas: within 1e-5 of one process with all the micro-batches") {
  const fs::path dir = temp_dir("replicas");
  // Clipped too: each replica clips the replicas' summed gradients by the norm over its
  // pipeline's two ranks, as the one process clips its whole model.
  for (const std::vector<std::string>& clip :
       {std::vector<std::string>{},
        std::vector<std::string>{"--clip-grad-norm", "0.05", "--optimizer", "sgd", "--lr", "0.1"}}) {
    CAPTURE(clip.size());
    const fs::path one = dir / "one.safetensors", many = dir / "mpi.safetensors";
    const Run single = train(with(recipe(dir, 8), with(clip, {"--devices", "cpu:0,cpu:1",
                                                              "--save", one.string()})));
    REQUIRE_MESSAGE(single.status == 0, single.output);
    // The model has 3 blocks; 2 ranks per pipeline merge them as --devices cpu:0,cpu:1 does.
    const Run run = train_mpi(4, with(recipe(dir, 4), with(clip, {"--distributed",
                                                                  "--data-parallel", "2",
                                                                  "--save", many.string()})));
    REQUIRE_MESSAGE(run.status == 0, run.output);
    CHECK(run.output.find("2 ranks x 2 replica") != std::string::npos);
    // A replica's rows are cut by the runtime from the whole batch (Runtime::step(HostBatch)).
    CHECK(run.output.find("cut from a batch on the host") != std::string::npos);
    check_same(many, one, /*exact=*/false);
  }
}

TEST_CASE("a distributed checkpoint resumes exactly") {
  const fs::path dir = temp_dir("resume");
  const fs::path whole = dir / "whole.safetensors", resumed = dir / "resumed.safetensors";
  const auto base = with(recipe(dir, 4), {"--distributed", "--data-parallel", "2"});
  const Run straight = train_mpi(4, with(base, {"--save", whole.string()}));
  REQUIRE_MESSAGE(straight.status == 0, straight.output);
  // Two steps, a checkpoint gathered on rank 0; then the rest from it.
  std::vector<std::string> first = with(base, {"--checkpoint-dir", (dir / "ckpt").string()});
  first[std::find(first.begin(), first.end(), "--steps") - first.begin() + 1] = "2";
  const Run a = train_mpi(4, first);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = train_mpi(4, with(base, {"--checkpoint-dir", (dir / "ckpt").string(), "--resume",
                                         "--save", resumed.string()}));
  REQUIRE_MESSAGE(b.status == 0, b.output);
  CHECK(b.output.find("resumed from") != std::string::npos);
  check_same(resumed, whole, /*exact=*/true);
}

// With two GPUs or more (tools/gpu-check.sh runs this case), 2 ranks on a GPU each against
// one process on cuda:0,cuda:1: the same kernels on the same GPUs, the activations by NCCL
// instead of a peer copy; within 1e-5, since a GPU library may choose its algorithms anew in
// each process. Without them, the one refusal a user gets here.
TEST_CASE("GPUs (--devices cuda): 2 ranks save what one process on 2 GPUs saves, or one refusal") {
  const fs::path dir = temp_dir("gpus");
  const auto base = on_gpus(recipe(dir, 4));
  const int gpus = brigade::cuda_device_count();
#if defined(BRIGADE_HAVE_CUDA) && BRIGADE_TEST_HAVE_NCCL
  if (gpus >= 2) {
    const fs::path one = dir / "one.safetensors", many = dir / "mpi.safetensors";
    const Run single = train(with(base, {"--devices", "cuda:0,cuda:1", "--save", one.string()}));
    REQUIRE_MESSAGE(single.status == 0, single.output);
    const Run run = train_mpi(2, with(base, {"--distributed", "--devices", "cuda", "--save",
                                             many.string()}));
    REQUIRE_MESSAGE(run.status == 0, run.output);
    CHECK_MESSAGE(run.output.find("cuda:0") != std::string::npos, run.output);
    check_same(many, one, /*exact=*/false);
    return;
  }
  const char* refusal = "GPU(s) for its 2 rank(s)";  // this host is short of GPUs
#elif defined(BRIGADE_HAVE_CUDA)
  const char* refusal = "this brigade-train was built without NCCL";
#else
  const char* refusal = "this brigade-train was built without CUDA";
#endif
  CAPTURE(gpus);
  const Run run = train_mpi(2, with(base, {"--distributed", "--devices", "cuda"}));
  CHECK_MESSAGE(run.status != 0, run.output);
  CHECK_MESSAGE(count(run.output, refusal) == 1, run.output);
  CHECK_MESSAGE(count(run.output, "--devices cuda with --distributed") == 1, run.output);
}

#if defined(BRIGADE_CUDA_EMULATED) && BRIGADE_TEST_HAVE_NCCL
// Emulated GPUs, one per rank, with emulated NCCL (kernels/emu/nccl): the activations and
// gradients between the stages go by NcclLink, the replicas' gradients by NcclReducer, and
// every step's loss is the CPU devices' (MPI links and reducer) within 1e-6: the GPU path's
// kernels (the emulated vendor libraries' references) round differently from the CPU path's.
// Three shapes: 2 ranks of one stage, 2 x 2 replicas, and 2 ranks of 2 interleaved stages
// each (several stages on a rank's GPU, so two NcclLinks, each on its own communicator, join
// the same two ranks in each direction).
TEST_CASE("emulated GPUs: 2 ranks, 2 x 2 replicas and interleaved stages over NCCL train as "
          "CPU ranks over MPI") {
  const fs::path dir = temp_dir("emulated-nccl");
  const fs::path model = dir / "three.model";
  std::ofstream(model) << kModel;
  const std::vector<std::string> base = {"--model", model.string(), "--data", "synthetic",
                                         "--synthetic-count", "320", "--batch", "32", "--steps",
                                         "4", "--distributed"};
  struct Case {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  for (const Case& c :
       {Case{"2", 2, {}}, Case{"2-replicas", 4, {"--data-parallel", "2"}},
        Case{"2x2-interleaved", 2,
             {"--schedule", "interleaved-1f1b", "--chunks", "2", "--balance", "params"}}}) {
    CAPTURE(c.name);
    const fs::path gpu = dir / (std::string("gpu-") + c.name + ".jsonl"),
                   cpu = dir / (std::string("cpu-") + c.name + ".jsonl");
    // Each rank a GPU of its own: its local rank's, among as many as the host has ranks.
    const Run on_gpus = run_command(
        "BRIGADE_EMULATED_GPUS=" + std::to_string(c.ranks) + " timeout 300 " + BRIGADE_MPIRUN +
        " --oversubscribe --allow-run-as-root -np " + std::to_string(c.ranks) + " " +
        BRIGADE_TRAIN +
        quoted(with(with(base, c.flags), {"--devices", "cuda", "--metrics", gpu.string()})));
    REQUIRE_MESSAGE(on_gpus.status == 0, on_gpus.output);
    const Run on_cpus = train_mpi(c.ranks, with(with(base, c.flags),
                                                {"--devices", "cpu", "--threads-per-device", "1",
                                                 "--metrics", cpu.string()}));
    REQUIRE_MESSAGE(on_cpus.status == 0, on_cpus.output);
    const std::vector<double> want = brigade::train::test::step_losses(cpu);
    const std::vector<double> got = brigade::train::test::step_losses(gpu);
    REQUIRE(want.size() == 4);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(got[i] - want[i]) <= 1e-6);
    }
  }
}


// "  stage 1 on X: maxpool2d_1 .. dense_2 (6 layers), ..." -> the lines without " on X".
std::vector<std::string> stage_lines(const std::string& output) {
  std::vector<std::string> lines;
  for (size_t at = output.find("\n  stage "); at != std::string::npos;
       at = output.find("\n  stage ", at + 1)) {
    const std::string line = output.substr(at + 1, output.find('\n', at + 1) - at - 1);
    const size_t on = line.find(" on "), colon = line.find(": ");
    lines.push_back(line.substr(0, on) + line.substr(colon));
  }
  return lines;
}

// --balance flops over GPU ranks: a rank's list holds its GPU and CPU devices standing in for
// the other ranks' GPUs, weighed as GPUs alike (PlanRequest::alike, pipeline/runtime/plan.h),
// so every rank cuts as one process on 2 GPUs does and trains alike; the placement names the
// ranks. (Rank 0 once timed its stand-in as a CPU, rank 1 its own, and their stages did not fit.)
TEST_CASE("emulated GPUs: --balance flops over 2 GPU ranks cuts as one process on 2 GPUs") {
  const fs::path dir = temp_dir("emulated-flops");
  const fs::path model = dir / "three.model";
  std::ofstream(model) << kModel;
  const std::vector<std::string> base = {"--model", model.string(), "--data", "synthetic",
                                         "--synthetic-count", "320", "--batch", "32", "--steps",
                                         "3", "--balance", "flops"};
  const fs::path one = dir / "one.jsonl", ranks = dir / "ranks.jsonl";
  const Run single = run_command(
      std::string("BRIGADE_EMULATED_GPUS=2 timeout 300 ") + BRIGADE_TRAIN +
      quoted(with(base, {"--devices", "cuda:0,cuda:1", "--metrics", one.string()})));
  REQUIRE_MESSAGE(single.status == 0, single.output);
  const Run run = run_command(
      std::string("BRIGADE_EMULATED_GPUS=2 timeout 300 ") + BRIGADE_MPIRUN +
      " --oversubscribe --allow-run-as-root -np 2 " + BRIGADE_TRAIN +
      quoted(with(base, {"--distributed", "--devices", "cuda", "--metrics", ranks.string()})));
  REQUIRE_MESSAGE(run.status == 0, run.output);
  CAPTURE(run.output);
  CHECK(stage_lines(run.output).size() == 2);
  CHECK(stage_lines(run.output) == stage_lines(single.output));
  CHECK(run.output.find("stage 1 on rank 1: ") != std::string::npos);
  CHECK(run.output.find("placement (GPUs only, cut by --balance flops)") != std::string::npos);
  CHECK(run.output.find(" on cpu:") == std::string::npos);
  const std::vector<double> want = brigade::train::test::step_losses(one);
  const std::vector<double> got = brigade::train::test::step_losses(ranks);
  REQUIRE(want.size() == 3);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 1e-6);
}

#endif

}  // namespace

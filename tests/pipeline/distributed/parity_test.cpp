// brigade-train --distributed under mpirun against the same training in one process: the
// parameters it saves (--save, gathered on rank 0) after a few steps of a small model on
// synthetic data, for 2 and 3 ranks (one per stage), 2 ranks running 2 or 3 interleaved
// stages each or a V, clipping by the global norm, and 2 stages x 2 replicas; the exact
// resume of a distributed checkpoint; a failed --check-finite, and a NaN injected on one rank
// (BRIGADE_INJECT_NAN), ending every rank with the first failure's cause, leaving the last
// good checkpoint; and the bad launches, each refused on rank 0 with one message and a non-zero exit of
// every rank.
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
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "layers/model/safetensors.h"
#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

namespace {

namespace fs = std::filesystem;

using brigade::train::test::Run;
using brigade::train::test::run_command;

std::string quoted(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += " '" + a + "'";
  return s;
}

// brigade-train alone, and under `mpirun -np ranks`; each bounded by `timeout`.
Run train(const std::vector<std::string>& args) {
  return run_command(std::string("timeout 300 ") + BRIGADE_TRAIN + quoted(args));
}
Run train_mpi(int ranks, const std::vector<std::string>& args) {
  return run_command(std::string("timeout 300 ") + BRIGADE_MPIRUN +
               " --oversubscribe --allow-run-as-root -np " + std::to_string(ranks) + " " +
               BRIGADE_TRAIN + quoted(args));
}

fs::path temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("brigade-dist-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Three device blocks, 11,042 parameters, dropout in two stages (so masks must agree).
constexpr const char* kModel =
    "input 28x28x1\n"
    "device 0\n"
    "conv2d filters=4 kernel=3x3 activation=relu\n"
    "maxpool2d pool=2x2\n"
    "device 1\n"
    "dropout rate=0.25\n"
    "flatten\n"
    "dense units=16 activation=relu\n"
    "device 2\n"
    "dropout rate=0.5\n"
    "dense units=10 activation=softmax\n";

std::vector<std::string> recipe(const fs::path& dir, int microbatches) {
  const fs::path model = dir / "three.model";
  if (!fs::exists(model)) std::ofstream(model) << kModel;
  return {"--model", model.string(), "--data", "synthetic", "--synthetic-count", "240",
          "--batch", "24", "--steps", "4", "--microbatches", std::to_string(microbatches),
          "--optimizer", "adam", "--lr", "0.01",
          // one thread per device in both runs, whatever the machine: the same kernels' splits
          "--threads-per-device", "1"};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The recipe for GPUs: without its thread count, which is a CPU device's (brigade-train refuses
// one for a GPU).
std::vector<std::string> on_gpus(std::vector<std::string> a) {
  const auto at = std::find(a.begin(), a.end(), "--threads-per-device");
  if (at != a.end()) a.erase(at, at + 2);
  return a;
}

// Every tensor of two safetensors files: bit-identical, or within 1e-5 (1 + |b|).
void check_same(const fs::path& got, const fs::path& want, bool exact) {
  const auto a = brigade::safetensors::read_file(got.string());
  const auto b = brigade::safetensors::read_file(want.string());
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& t : b.tensors) {
    CAPTURE(t.name);
    const auto* u = a.find(t.name);
    REQUIRE(u != nullptr);
    const auto x = a.bytes(*u), y = b.bytes(t);
    REQUIRE(x.size() == y.size());
    std::vector<float> fx(x.size() / 4), fy(y.size() / 4);
    std::memcpy(fx.data(), x.data(), x.size());
    std::memcpy(fy.data(), y.data(), y.size());
    for (size_t i = 0; i < fx.size(); ++i) {
      const bool ok = exact ? fx[i] == fy[i]
                            : std::fabs(fx[i] - fy[i]) <= 1e-5 * (1 + std::fabs(fy[i]));
      if (!ok) {
        FAIL_CHECK("element " << i << ": " << fx[i] << " vs " << fy[i]
                              << (exact ? " (expected bit-exact)" : " beyond 1e-5"));
        break;
      }
    }
  }
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

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
  for (const Case& c : {Case{"2", 2, {}}, Case{"3", 3, {}}, Case{"2x2", 2, interleaved(2)},
                        Case{"2x3", 2, interleaved(3)}, Case{"3-clip", 3, clip},
                        Case{"2x2-clip", 2, with(interleaved(2), clip)}, Case{"2-zb-v", 2, vee}}) {
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

// A job that must fail, under mpirun with `env` before it (e.g. the NaN injection). 30 s is
// the hang detector (these jobs end in a few seconds), and every wait of the ranks gives up
// after 20 s (BRIGADE_MPI_TIMEOUT_S) saying what it waited on, so a hang shows where each rank
// was instead of only that the job timed out.
Run failing_job(int ranks, const std::string& env, const std::vector<std::string>& args) {
  return run_command("BRIGADE_MPI_TIMEOUT_S=20 " + env + " timeout 30 " + BRIGADE_MPIRUN +
                     " --oversubscribe --allow-run-as-root -np " + std::to_string(ranks) + " " +
                     BRIGADE_TRAIN + quoted(args));
}

// The line rank `rank` ended with: "brigade: rank r failed: ..." or "brigade: rank r stops:
// ..." (pipeline/distributed/faults.h); "" if it printed none.
std::string ending_line(const std::string& output, int rank) {
  const std::string head = "brigade: rank " + std::to_string(rank) + " ";
  for (size_t at = output.find(head); at != std::string::npos; at = output.find(head, at + 1)) {
    const std::string line = output.substr(at, output.find('\n', at) - at);
    if (line.compare(head.size(), 8, "failed: ") == 0 || line.compare(head.size(), 7, "stops: ") == 0)
      return line;
  }
  return "";
}

// Every rank of the job ended on its own line naming the first failure it heard of: a rank of
// `failed` (which says "failed", or, when another of `failed` reached it first, "stops"), the
// action `action` of stage `stage` on micro-batch 0, and its non-finite value.
void check_every_rank_names(const Run& run, int ranks, const std::vector<int>& failed,
                            const std::string& action, int stage) {
  CHECK(run.status != 0);
  CHECK(run.status != 124);  // not the hang detector
  CHECK(run.output.find("still waiting") == std::string::npos);
  const auto is_failed = [&](int r) {
    return std::find(failed.begin(), failed.end(), r) != failed.end();
  };
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    const std::string line = ending_line(run.output, r);
    CAPTURE(line);
    const std::string me = "brigade: rank " + std::to_string(r) + " ";
    bool names_a_failed_rank = is_failed(r) && line.rfind(me + "failed: ", 0) == 0;
    for (int f : failed)
      names_a_failed_rank = names_a_failed_rank ||
                            line.rfind(me + "stops: rank " + std::to_string(f) + " failed: ", 0) == 0;
    CHECK(names_a_failed_rank);
    // "action 1F0 (stage 1, micro-batch 0)" from a link, "stage 1, action 1F0 (micro-batch 0)"
    // from a GPU's check verdict at the step's end.
    CHECK(line.find("action " + action + " ") != std::string::npos);
    CHECK(line.find("stage " + std::to_string(stage) + ",") != std::string::npos);
    CHECK(line.find("micro-batch 0)") != std::string::npos);
    CHECK(line.find("non-finite value") != std::string::npos);
  }
  // mpirun's own "MPI_ABORT was invoked on rank r" is not checked: OpenMPI 4.1 sometimes
  // loses it ("ORTE_ERROR_LOG: Data unpack would read past end of buffer ... show_help.c").
}

// --check-finite under mpirun: a check that fails on one rank ends every rank, naming the
// stage and action that one process names for the same run. The first block has no
// parameters, and SGD at lr 1e39 makes every weight Inf in step 1's update (divergence_test.cpp
// says why), so step 2's first non-finite value is stage 1's output: on rank 1, whose host
// then waits for rank 2's gradients while rank 2 waits for its activations. Only the link's
// failure message ends that before the links' deadline; rank 1's host hears it from its own
// link and takes the job down (pipeline/distributed/faults.h).
TEST_CASE("--check-finite: a NaN on rank 1 of 3 (and in a 2 x 2 job) ends every rank, named") {
  const fs::path dir = temp_dir("check-finite");
  const fs::path model = dir / "nan.model";
  std::ofstream(model) << "input 28x28x1\n"
                          "device 0\n"
                          "maxpool2d pool=2x2\n"
                          "device 1\n"
                          "flatten\n"
                          "dense units=16 activation=relu\n"
                          "device 2\n"
                          "dense units=10 activation=softmax\n";
  const std::vector<std::string> base = {
      "--model", model.string(), "--data", "synthetic", "--synthetic-count", "240", "--batch", "24",
      "--steps", "4", "--microbatches", "4", "--optimizer", "sgd", "--lr", "1e39",
      "--check-finite", "--threads-per-device", "1"};
  const Run single = train(with(base, {"--devices", "cpu:0,cpu:1,cpu:2"}));
  REQUIRE_MESSAGE(single.status == 1, single.output);
  REQUIRE_MESSAGE(single.output.find("step 2: ") != std::string::npos, single.output);
  REQUIRE_MESSAGE(single.output.find(", stage 1, action 1F0 ") != std::string::npos, single.output);

  const Run run = failing_job(3, "", with(base, {"--distributed"}));
  CAPTURE(run.output);
  check_every_rank_names(run, 3, {1}, "1F0", 1);
  CHECK(run.output.find("brigade: rank 1 failed: activations 1->2: micro-batch 0 not sent: "
                        "action 1F0 (stage 1, micro-batch 0): non-finite value") !=
        std::string::npos);

  // Two replicas of two stages (the blocks merge as in the parity case above: stage 0 now
  // holds the dense layer): both replicas fail alike, at their stage 0, ranks 0 and 2.
  const Run replicas = failing_job(4, "", with(base, {"--distributed", "--data-parallel", "2"}));
  CAPTURE(replicas.output);
  check_every_rank_names(replicas, 4, {0, 2}, "0F0", 0);
}

// BRIGADE_INJECT_NAN (tools/train/fault_injection.h): one rank's weight turns NaN before step 3
// — rank 1 of 3, or rank 3 of a 2 x 2 job (replica 1's last stage, alone: replica 0's ranks
// wait for it in their links and in the all-reduce). Every rank ends naming that rank's first
// failure; no rank writes a checkpoint after the failed step (no replica updated its
// parameters, and no checkpoint holds the NaN): the one of step 2 stays, and resumes to what a
// run without the fault saves.
TEST_CASE("a NaN injected on one rank of 3, or on one replica of 2 x 2, ends every rank, named") {
  const fs::path dir = temp_dir("inject-nan");
  struct Case {
    const char* name;
    int ranks;
    std::vector<std::string> layout;
    int failed;  // the rank given the NaN
    std::string action, cause;
    int stage;
  };
  for (const Case& c :
       {Case{"3", 3, {}, 1, "1F0", "activations 1->2: micro-batch 0 not sent", 1},
        Case{"2x2", 4, {"--data-parallel", "2"}, 3, "1F0", "gradients 1->0: micro-batch 0 not sent", 1}}) {
    CAPTURE(c.name);
    const std::string name = c.name;
    const fs::path checkpoints = dir / ("ckpt-" + name);
    const fs::path straight = dir / ("straight-" + name + ".safetensors");
    const fs::path resumed = dir / ("resumed-" + name + ".safetensors");
    const auto base = with(with(recipe(dir, 4), c.layout), {"--distributed", "--check-finite"});
    const Run faulted =
        failing_job(c.ranks, "BRIGADE_INJECT_NAN=" + std::to_string(c.failed) + ":3",
                    with(base, {"--checkpoint-dir", checkpoints.string(), "--checkpoint-every", "1"}));
    CAPTURE(faulted.output);
    check_every_rank_names(faulted, c.ranks, {c.failed}, c.action, c.stage);
    CHECK(faulted.output.find("brigade: rank " + std::to_string(c.failed) + " failed: " + c.cause +
                              ": action " + c.action) != std::string::npos);
    CHECK(faulted.output.find("non-finite value nan at element 0 of the output of stage 1") !=
          std::string::npos);
    // The checkpoint of step 2 (a NaN would be refused as it loads), resumed without the fault.
    const Run resume = train_mpi(c.ranks, with(base, {"--checkpoint-dir", checkpoints.string(),
                                                      "--resume", "--save", resumed.string()}));
    REQUIRE_MESSAGE(resume.status == 0, resume.output);
    CHECK_MESSAGE(resume.output.find("checkpoint.safetensors at step 2 (") != std::string::npos,
                  resume.output);
    const Run whole = train_mpi(c.ranks, with(base, {"--save", straight.string()}));
    REQUIRE_MESSAGE(whole.status == 0, whole.output);
    check_same(resumed, straight, /*exact=*/true);
  }
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
TEST_CASE("emulated GPUs: 2 ranks and 2 x 2 replicas over NCCL train as CPU ranks over MPI") {
  const fs::path dir = temp_dir("emulated-nccl");
  const fs::path model = dir / "three.model";
  std::ofstream(model) << kModel;
  const std::vector<std::string> base = {"--model", model.string(), "--data", "synthetic",
                                         "--synthetic-count", "320", "--batch", "32", "--steps",
                                         "4", "--distributed"};
  for (const int ranks : {2, 4}) {
    CAPTURE(ranks);
    const std::vector<std::string> replicas =
        ranks == 4 ? std::vector<std::string>{"--data-parallel", "2"} : std::vector<std::string>{};
    const fs::path gpu = dir / ("gpu" + std::to_string(ranks) + ".jsonl"),
                   cpu = dir / ("cpu" + std::to_string(ranks) + ".jsonl");
    // Each rank a GPU of its own: its local rank's, among as many as the host has ranks.
    const Run on_gpus = run_command(
        "BRIGADE_EMULATED_GPUS=" + std::to_string(ranks) + " timeout 300 " + BRIGADE_MPIRUN +
        " --oversubscribe --allow-run-as-root -np " + std::to_string(ranks) + " " + BRIGADE_TRAIN +
        quoted(with(with(base, replicas), {"--devices", "cuda", "--metrics", gpu.string()})));
    REQUIRE_MESSAGE(on_gpus.status == 0, on_gpus.output);
    const Run on_cpus = train_mpi(ranks, with(with(base, replicas),
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

// A NaN in a weight of rank 3 (replica 1's last stage) on emulated GPUs: its check fails at the
// step's end, and replica 0's stage 1 must not enqueue an ncclAllReduce that rank 3 never joins
// (its GPU would wait there, where no host hears a fault notice): the replicas agree first
// (nccl_reducer.h), so every rank ends naming the failure, and the checkpoint of step 2 stays.
TEST_CASE("emulated GPUs: a NaN on one replica of 2 x 2 ends every rank, named") {
  const fs::path dir = temp_dir("emulated-nccl-nan");
  const fs::path model = dir / "three.model";
  std::ofstream(model) << kModel;
  const fs::path checkpoints = dir / "ckpt";
  const Run run = failing_job(
      4, "BRIGADE_EMULATED_GPUS=4 BRIGADE_INJECT_NAN=3:3",
      {"--model", model.string(), "--data", "synthetic", "--synthetic-count", "320", "--batch",
       "32", "--steps", "4", "--distributed", "--data-parallel", "2", "--devices", "cuda",
       "--check-finite", "--checkpoint-dir", checkpoints.string(), "--checkpoint-every", "1"});
  CAPTURE(run.output);
  check_every_rank_names(run, 4, {3}, "1F0", 1);
  const auto checkpoint = brigade::safetensors::read_file((checkpoints / "checkpoint.safetensors").string());
  CHECK(checkpoint.metadata.at("step") == "2");
}
#endif

TEST_CASE("bad launches: one message on rank 0, every rank exits non-zero, no hang") {
  const fs::path dir = temp_dir("bad");
  const auto base = recipe(dir, 4);
  struct Case {
    int ranks;
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : {
           Case{3, {"--distributed", "--data-parallel", "2"}, "must be P x D"},
           Case{4, {"--distributed"}, "the model has 3 device blocks"},
           Case{2, {"--distributed", "--balance", "params", "--chunks", "8"},
                "stages, but the model has only 7 layers"},
           Case{2, {"--distributed", "--devices", "cpu:0"}, "each rank runs one device of its own"},
       }) {
    CAPTURE(c.message);
    const Run run = train_mpi(c.ranks, with(base, c.args));
    CHECK_MESSAGE(run.status != 0, run.output);
    CHECK_MESSAGE(count(run.output, c.message) == 1, run.output);
  }
  SUBCASE("--distributed without mpirun") {
    const Run run = train(with(base, {"--distributed"}));
    CHECK(run.status == 2);
    CHECK_MESSAGE(run.output.find("not started by mpirun") != std::string::npos, run.output);
  }
  SUBCASE("--data-parallel without --distributed") {
    const Run run = train(with(base, {"--data-parallel", "2"}));
    CHECK(run.status == 2);
    CHECK_MESSAGE(run.output.find("needs --distributed") != std::string::npos, run.output);
  }
}

}  // namespace

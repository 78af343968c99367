// brigade-train --distributed when the job must fail: a failed --check-finite, and a NaN
// injected on one rank (BRIGADE_INJECT_NAN), end every rank with the first failure's cause and
// leave the last good checkpoint; and the bad launches, each refused on rank 0 with one message
// and a non-zero exit of every rank. Each job runs under `timeout` (dist_train_support.h), so a
// hang becomes a failure.

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "tests/pipeline/distributed/dist_train_support.h"

namespace {

using namespace brigade::distributed::test;

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

#if defined(BRIGADE_CUDA_EMULATED) && BRIGADE_TEST_HAVE_NCCL
// A NaN in a weight on emulated GPUs: rank 1 of 3, or rank 3 of 2 x 2 (replica 1's last stage,
// alone). A GPU's check runs on a host stream behind the GPU, so the NcclLink that sends the
// checked output waits (on its own thread) for the checks' verdict and sends the cause in the
// tensor's place: the neighbour names rank 1's first failure, not a check of its own that the
// NaN would have failed next (pipeline/distributed/nccl_link.h). No rank completes the step —
// each needs a tensor the failed rank never sends, and replica 0's stage 1 must not enqueue
// an ncclAllReduce that rank 3 never joins (the replicas agree first, nccl_reducer.h) — so the
// checkpoint of step 2 stays.
TEST_CASE("emulated GPUs: a NaN on rank 1 of 3, or on one replica of 2 x 2, ends every rank, named") {
  const fs::path dir = temp_dir("emulated-nccl-nan");
  const fs::path model = dir / "three.model";
  std::ofstream(model) << kModel;
  struct Case {
    const char* name;
    int ranks;
    std::vector<std::string> layout;
    int failed;  // the rank given the NaN
    std::string cause;
  };
  for (const Case& c :
       {Case{"3", 3, {}, 1, "activations 1->2: micro-batch 0 not sent"},
        Case{"2x2", 4, {"--data-parallel", "2"}, 3, "gradients 1->0: micro-batch 0 not sent"}}) {
    CAPTURE(c.name);
    const fs::path checkpoints = dir / (std::string("ckpt-") + c.name);
    const Run run = failing_job(
        c.ranks,
        "BRIGADE_EMULATED_GPUS=" + std::to_string(c.ranks) +
            " BRIGADE_INJECT_NAN=" + std::to_string(c.failed) + ":3",
        with({"--model", model.string(), "--data", "synthetic", "--synthetic-count", "320",
              "--batch", "32", "--steps", "4", "--distributed", "--devices", "cuda",
              "--check-finite", "--checkpoint-dir", checkpoints.string(), "--checkpoint-every",
              "1"},
             c.layout));
    CAPTURE(run.output);
    check_every_rank_names(run, c.ranks, {c.failed}, "1F0", 1);
    CHECK(run.output.find("brigade: rank " + std::to_string(c.failed) + " failed: " + c.cause +
                          ": action 1F0 (stage 1, micro-batch 0): non-finite value nan") !=
          std::string::npos);
    const auto checkpoint =
        brigade::safetensors::read_file((checkpoints / "checkpoint.safetensors").string());
    CHECK(checkpoint.metadata.at("step") == "2");
  }
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
  // (Each job in a SUBCASE of its own: doctest runs the body once per subcase, and a job
  // outside them would run as many times.)
  SUBCASE("counts and devices the job cannot run") {
    for (const Case& c : {
             Case{3, {"--distributed", "--data-parallel", "2"}, "must be P x D"},
             Case{4, {"--distributed"}, "the model has 3 device blocks"},
             Case{2, {"--distributed", "--balance", "params", "--chunks", "8"},
                  "stages, but the model has only 7 layers"},
             Case{2, {"--distributed", "--devices", "cpu:0"},
                  "each rank runs one device of its own"},
         }) {
      CAPTURE(c.message);
      const Run run = train_mpi(c.ranks, with(base, c.args));
      CHECK_MESSAGE(run.status != 0, run.output);
      CHECK_MESSAGE(count(run.output, c.message) == 1, run.output);
    }
  }
  SUBCASE("rank 0's output checks, and an input every rank misses") {
    // Refusals of the reporter's own checks (its output files): every rank refuses with it,
    // exit 2, once said. The ranks that did not check went on into a collective of theirs and
    // the job hung until killed.
    for (const auto& output :
         {std::vector<std::string>{"--save", (dir / "no" / "x.st").string()},
          std::vector<std::string>{"--plot", (dir / "p.png").string()}}) {
      CAPTURE(output[0]);
      const Run run =
          train_mpi(2, with(base, with({"--distributed", "--balance", "flops"}, output)));
      CHECK_MESSAGE(run.status == 2, run.output);
      CHECK_MESSAGE(count(run.output, "brigade-train: " + output[0] + " '") == 1, run.output);
    }
    // An input every rank misses alike (the data set): said once, by rank 0, exit 2 (each rank
    // once said it as its own failure, exit 1).
    {
      const Run run = train_mpi(3, {"--distributed", "--model", base[1], "--data-dir",
                                    (dir / "none").string(), "--batch", "24", "--steps", "1"});
      CHECK_MESSAGE(run.status == 2, run.output);
      CHECK_MESSAGE(count(run.output, "Fashion-MNIST not found") == 1, run.output);
      CHECK_MESSAGE(count(run.output, "brigade: rank") == 0, run.output);
    }
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

// A job of 2 ranks, one per stage of the recipe in `dir`, rank 1 alone given `variable`
// (NAME=VALUE) in its environment; every rank waits at most 5 s (BRIGADE_MPI_TIMEOUT_S) and
// the job 60 s (the hang detector, status 124).
Run with_rank_1_apart(const fs::path& dir, const std::string& variable) {
  const std::string args =
      quoted(with(recipe(dir, 4), {"--distributed", "--balance", "flops"}));
  return run_command(std::string("BRIGADE_MPI_TIMEOUT_S=5 timeout 60 ") + BRIGADE_MPIRUN +
                     " --oversubscribe --allow-run-as-root -np 1 " + BRIGADE_TRAIN + args +
                     " : -np 1 -x " + variable + " " + BRIGADE_TRAIN + args);
}

// A refusal of one rank alone (its own environment, here a bad BRIGADE_CPU_ISA on rank 1):
// the others went on into a collective, and it waited for them at MPI_Finalize, the job hung
// without a word. It waits for the others to refuse too (min(BRIGADE_MPI_TIMEOUT_S / 2,
// 30 s), here 2.5 s), then ends the job naming itself.
TEST_CASE("a refusal of one rank alone ends the job, naming that rank and why") {
  const Run run = with_rank_1_apart(temp_dir("alone"), "BRIGADE_CPU_ISA=bogus");
  CAPTURE(run.output);
  CHECK(run.status != 0);
  CHECK(run.status != 124);  // not the hang detector
  CHECK(ending_line(run.output, 1).starts_with("brigade: rank 1 failed: BRIGADE_CPU_ISA=bogus"));
}

// A bad BRIGADE_MPI_TIMEOUT_S in one rank's environment alone: it was refused before MPI
// started, by that rank's "brigade-train: BRIGADE_MPI_TIMEOUT_S=..." alone, which named no
// rank, so the job's output did not say whose environment to mend. The ranks agree on it:
// rank 0 says it once, naming the rank, and every rank exits 2.
TEST_CASE("a bad BRIGADE_MPI_TIMEOUT_S on one rank is refused once, naming that rank") {
  const Run run = with_rank_1_apart(temp_dir("timeout-env"), "BRIGADE_MPI_TIMEOUT_S=soon");
  CAPTURE(run.output);
  CHECK(run.status == 2);
  CHECK(count(run.output, "BRIGADE_MPI_TIMEOUT_S=") == 1);
  CHECK(count(run.output, "brigade-train: error: rank 1: BRIGADE_MPI_TIMEOUT_S=\"soon\": "
                          "expected a number of seconds above 0") == 1);
}

}  // namespace

// Checkpoints and resume, through the built brigade-train: a run stopped by --steps and
// resumed gives EXACTLY the losses of an uninterrupted run on CPU devices (stopped by SIGINT:
// signals_test.cpp), and a checkpoint of another model, other settings, or a damaged file is
// refused with what differs.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/cuda/path.h"
#include "layers/model/safetensors.h"
#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"
#include "tools/train/suggested_command.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

// Synthetic data (10 batches of 32 per epoch) and the small model, `devices`.
std::vector<std::string> recipe(const fs::path& dir, const std::string& devices,
                                std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "320",
                                   "--batch", "32", "--devices", devices, "--epochs", "5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The three runs of a resume check, in `dir`: `whole`, `steps` steps uninterrupted (a.jsonl);
// `half`, the first half of them with a checkpoint (b.jsonl, ckpt/); `resumed`, `half` resumed
// to `steps`, its metrics appended to b.jsonl.
struct ResumeRuns {
  std::vector<std::string> whole, half, resumed;
};
ResumeRuns resume_runs(const fs::path& dir, const std::string& devices,
                       const std::vector<std::string>& extra, int steps) {
  ResumeRuns r;
  r.whole = r.half = r.resumed = recipe(dir, devices, extra);
  r.whole.insert(r.whole.end(),
                 {"--steps", std::to_string(steps), "--metrics", (dir / "a.jsonl").string()});
  r.half.insert(r.half.end(), {"--steps", std::to_string(steps / 2), "--metrics",
                               (dir / "b.jsonl").string(), "--checkpoint-dir",
                               (dir / "ckpt").string()});
  r.resumed.insert(r.resumed.end(), {"--steps", std::to_string(steps), "--metrics",
                                     (dir / "b.jsonl").string(), "--checkpoint-dir",
                                     (dir / "ckpt").string(), "--resume"});
  return r;
}

// Uninterrupted: `steps` steps. Interrupted: half of them, then --resume to the end.
void check_exact_resume(const std::string& devices, std::vector<std::string> extra) {
  const fs::path dir = temp_dir("resume-" + std::to_string(extra.size()) + devices.substr(0, 5));
  constexpr int steps = 24;  // crosses two epoch ends; the stop falls mid-epoch
  const auto [a, b, c] = resume_runs(dir, devices, extra, steps);
  run_train_ok(a);
  run_train_ok(b);
  const Run resumed = run_train_ok(c);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  const std::vector<double> whole = step_losses(dir / "a.jsonl"), pieces = step_losses(dir / "b.jsonl");
  REQUIRE(whole.size() == steps);
  REQUIRE(pieces.size() == steps);
  for (int i = 0; i < steps; ++i) {
    CAPTURE(i);
    CHECK(pieces[static_cast<size_t>(i)] == whole[static_cast<size_t>(i)]);  // bit for bit
  }
  CHECK(whole.back() < whole.front());  // and it learns
}

}  // namespace

TEST_CASE("resume: stopped by --steps and resumed, the losses are bit for bit the same") {
  check_exact_resume("cpu:0", {});
}

TEST_CASE("resume: SGD with momentum resumes exactly too") {
  check_exact_resume("cpu:0", {"--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"});
}

TEST_CASE("resume: a pipelined run (2 CPU devices, 1F1B, 4 micro-batches) resumes exactly") {
  check_exact_resume("cpu:0,cpu:1", {"--schedule", "1f1b", "--microbatches", "4"});
}

// A checkpoint fixes its run's micro-batch count (the recipe), and --microbatches auto gives
// one by the devices: resumed on other devices, auto once gave their count and the checkpoint
// was refused ("microbatches: checkpoint 4, this run 1"). It takes the checkpoint's count now,
// says so, and the run goes on as the uninterrupted one did, bit for bit (a pipeline of any
// schedule trains like one device given the same micro-batches).
TEST_CASE("resume: on other devices, --microbatches auto keeps the checkpoint's count") {
  const fs::path dir = temp_dir("resume-auto-microbatches");
  constexpr int steps = 6;
  ResumeRuns r = resume_runs(dir, "cpu:0,cpu:1", {}, steps);  // auto: 4 micro-batches
  r.resumed = brigade::train::with_option(r.resumed, "--devices", "cpu:0");  // auto: 1
  run_train_ok(r.whole);
  run_train_ok(r.half);
  const Run resumed = run_train_ok(r.resumed);
  CHECK(resumed.output.find("--microbatches auto: 4, the checkpoint's") != std::string::npos);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  const std::vector<double> whole = step_losses(dir / "a.jsonl");
  const std::vector<double> pieces = step_losses(dir / "b.jsonl");
  REQUIRE(whole.size() == steps);
  CHECK(pieces == whole);  // bit for bit
  // A refusal of the count taken says where it came from: the user did not give it.
  const Run refused = run_train(brigade::train::with_option(r.resumed, "--batch", "3"));
  CHECK(refused.status == 2);
  CHECK(refused.output.find("--batch 3 is smaller than the 4 micro-batches of a step: every "
                            "micro-batch needs a sample (the 4 micro-batches are the "
                            "checkpoint's, which --resume keeps") != std::string::npos);
  // So does a schedule's refusal of it: interleaved-1f1b on 3 devices runs multiples of 3.
  std::vector<std::string> three =
      brigade::train::with_option(r.resumed, "--devices", "cpu:0,cpu:1,cpu:2");
  three.insert(three.end(), {"--balance", "flops"});
  const Run schedule = run_train(brigade::train::with_option(
      brigade::train::with_option(three, "--schedule", "interleaved-1f1b"), "--chunks", "1"));
  CHECK(schedule.status == 2);
  CHECK(schedule.output.find("micro-batches must be a multiple of the devices (p=3), got m=4; "
                             "try m=3 or m=6 (the 4 micro-batches are the checkpoint's") !=
        std::string::npos);
  // A refusal about something else does not say it: three devices for a model of two blocks.
  const Run other =
      run_train(brigade::train::with_option(r.resumed, "--devices", "cpu:0,cpu:1,cpu:2"));
  CHECK(other.status == 2);
  CHECK(other.output.find("the model has 2 device blocks") != std::string::npos);
  CHECK(other.output.find("checkpoint's") == std::string::npos);
  // Nor one that names micro-batches without refusing the count: 1F1B's first of 2 devices
  // holds 2 micro-batches at once at any count from 2 on, over a bound of 1. (The note once
  // went to every refusal whose words said "micro-batch".)
  const Run bound = run_train(brigade::train::with_option(
      brigade::train::with_option(r.resumed, "--devices", "cpu:0,cpu:1"), "--max-activations",
      "1"));
  CHECK(bound.status == 2);
  CHECK(bound.output.find("--max-activations 1: schedule 1f1b holds up to 2 micro-batches' "
                          "activations on device 0") != std::string::npos);
  CHECK(bound.output.find("checkpoint's") == std::string::npos);
}

// The same for a job under mpirun resumed on fewer ranks (3, then 2): rank 0 reads the count
// from the checkpoint, and every rank takes it.
TEST_CASE("resume: under mpirun on fewer ranks, --microbatches auto keeps the checkpoint's") {
  if (!have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  const fs::path dir = temp_dir("resume-auto-mpirun");
  const std::string ckpt = (dir / "ckpt").string();
  const auto job = [&](int ranks, const std::string& flags) {
    return run_command("mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                       " " + train_binary() + " --distributed --balance flops --data synthetic" +
                       " --synthetic-count 128 --batch 32 --checkpoint-dir " + ckpt + flags);
  };
  const Run half = job(3, " --steps 1");  // auto: 6 micro-batches
  CAPTURE(half.output);
  REQUIRE(half.status == 0);
  const Run resumed = job(2, " --steps 2 --resume");  // auto: 4
  CAPTURE(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("--microbatches auto: 6, the checkpoint's") != std::string::npos);
  CHECK(resumed.output.find("2 stages on 2 ranks x 1 replica(s), 6 micro-batches") !=
        std::string::npos);
  CHECK(resumed.output.find("done: 1 step") != std::string::npos);
}

TEST_CASE("one device and a pipeline over two give the same losses") {
  const fs::path dir = temp_dir("parity");
  std::vector<std::string> one = recipe(dir, "cpu:0", {"--steps", "6", "--metrics",
                                                         (dir / "one.jsonl").string()});
  std::vector<std::string> piped =
      recipe(dir, "cpu:0,cpu:1", {"--steps", "6", "--microbatches", "4", "--schedule", "gpipe",
                                  "--metrics", (dir / "piped.jsonl").string()});
  run_train_ok(one);
  run_train_ok(piped);
  const std::vector<double> a = step_losses(dir / "one.jsonl"), b = step_losses(dir / "piped.jsonl");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  // Micro-batches sum their gradients in another order than one batch: equal within rounding.
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 1e-5 * std::abs(a[i]));
}

// On GPUs — real ones, or emulated ones in an -Dcuda=emulated build (BRIGADE_EMULATED_GPUS) —
// the trainer's whole path: staging to cuda:0, a pipeline over the GPUs, the checkpoint read
// back from them. The run resumes exactly, and trains as the same run on CPU devices does.
// Two GPUs or more: a stage on each of two. One GPU: both stages on it (two chunks).
TEST_CASE("resume: a pipeline over GPUs resumes exactly and trains like CPU devices") {
  const int gpus = brigade::cuda_device_count();
  if (gpus == 0) {
    MESSAGE("no GPU: skipped");
    return;
  }
  const bool one = gpus == 1;
  const std::string gpu_devices = one ? "cuda:0" : "cuda:0,cuda:1",
                    cpu_devices = one ? "cpu:0" : "cpu:0,cpu:1";
  std::vector<std::string> pipeline = {"--microbatches", "4", "--schedule",
                                       one ? "interleaved-1f1b" : "1f1b"};
  if (one) pipeline.insert(pipeline.end(), {"--chunks", "2", "--balance", "params"});
  check_exact_resume(gpu_devices, pipeline);
  const fs::path dir = temp_dir("gpu-vs-cpu");
  std::vector<std::string> gpu = recipe(dir, gpu_devices, pipeline),
                           cpu = recipe(dir, cpu_devices, pipeline);
  gpu.insert(gpu.end(), {"--steps", "6", "--metrics", (dir / "gpu.jsonl").string()});
  cpu.insert(cpu.end(), {"--steps", "6", "--metrics", (dir / "cpu.jsonl").string()});
  const Run on_gpu = run_train_ok(gpu);
  run_train_ok(cpu);
  if (one) CHECK(on_gpu.output.find("stage 1 on cuda:0") != std::string::npos);  // both there
  const std::vector<double> a = step_losses(dir / "gpu.jsonl"), b = step_losses(dir / "cpu.jsonl");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  // Other kernels (GPU GEMMs and reductions sum in other orders): equal within 1e-4.
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 1e-4 * std::abs(b[i]));
}

// On GPUs the trainer learns a step's result while the next one runs (pipeline::Runtime::submit):
// an evaluation due after step 3 must still come right after step 3's line, on the parameters
// after step 3: the trainer waits for the step in flight first, before step 4 is submitted.
TEST_CASE("on GPUs, an evaluation due after a step comes after that step's line") {
  if (brigade::cuda_device_count() == 0) {
    MESSAGE("no GPU: skipped");
    return;
  }
  const fs::path dir = temp_dir("gpu-evals");
  std::vector<std::string> a = recipe(dir, "cuda:0", {"--eval-every", "3", "--steps", "7",
                                                      "--metrics", (dir / "a.jsonl").string()});
  run_train_ok(a);
  std::ifstream in(dir / "a.jsonl");
  int64_t last_step = 0, evals = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    CAPTURE(line);
    if (j["kind"] == "step") last_step = j["step"].get<int64_t>();
    if (j["kind"] != "eval") continue;
    CHECK(j["step"].get<int64_t>() == last_step);  // right after its own step's line
    CHECK((j["step"].get<int64_t>() % 3 == 0 || j["step"].get<int64_t>() == 7));  // 7: the end's
    ++evals;
  }
  CHECK(last_step == 7);
  CHECK(evals == 3);  // after steps 3, 6 and 7
}

// --math tf32 on one GPU (kernels/math_mode.h): the GEMMs and convolutions read their inputs
// rounded to TF32, so the run differs from fp32's, and stays close to it.
TEST_CASE("--math tf32 on one GPU trains close to fp32, and not equal to it") {
  if (brigade::cuda_device_count() == 0) {
    MESSAGE("no GPU: skipped");
    return;
  }
  const fs::path dir = temp_dir("tf32");
  std::vector<std::string> fp32 = recipe(dir, "cuda:0", {"--steps", "6"}), tf32 = fp32;
  if (brigade::cuda_path() != brigade::CudaPath::vendor) {
    // The hand-written kernels compute in fp32 only: the run is refused before it starts,
    // naming the path (brigade-train inherits BRIGADE_CUDA_PATH from this process).
    tf32.insert(tf32.end(), {"--math", "tf32"});
    const Run r = run_train(tf32);
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("the handwritten CUDA path of cuda:0 computes in fp32 only") !=
          std::string::npos);
    return;
  }
  fp32.insert(fp32.end(), {"--metrics", (dir / "fp32.jsonl").string()});
  tf32.insert(tf32.end(), {"--math", "tf32", "--metrics", (dir / "tf32.jsonl").string()});
  run_train_ok(fp32);
  const Run r = run_train_ok(tf32);
  CHECK(r.output.find("math tf32: forward algorithm") != std::string::npos);  // cuDNN's log
  const std::vector<double> a = step_losses(dir / "fp32.jsonl"), b = step_losses(dir / "tf32.jsonl");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  // TF32 keeps 10 of 23 mantissa bits: each input is off by at most 2^-11 relative, a product
  // of two by at most 2^-10 (about 1e-3), and a sum of products by at most that much of its
  // terms' magnitudes (less, as the errors' signs vary: on emulated GPUs the losses differ by
  // about 3e-5). The loss is a smooth function of those sums, and six Adam steps (updates
  // normalised: a gradient off by 1e-3 relative moves a weight by about lr · 1e-3) add little
  // to it, so 2e-3 relative, twice the worst bound of one product, holds every step; a
  // product that is wrong rather than rounded (a missing term, a wrong operand) moves the
  // first loss by far more.
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(a[i] - b[i]) <= 2e-3 * std::abs(a[i]));
    differs = differs || a[i] != b[i];
  }
#if defined(BRIGADE_CUDA_EMULATED)
  CHECK(differs);  // the emulated libraries round as tensor cores do whenever TF32 is asked
#else
  // NVIDIA_TF32_OVERRIDE=0 in the environment (tools/gpu-check.sh sets it for PyTorch's FP32
  // benchmark only) makes cuBLAS and cuDNN compute in FP32 whatever the math mode asks: then
  // the runs are the same.
  const char* override_tf32 = std::getenv("NVIDIA_TF32_OVERRIDE");
  const bool tf32_overridden = override_tf32 != nullptr && std::string(override_tf32) == "0";
  CHECK(differs != tf32_overridden);
#endif
}

// Once "done: 0 steps" and exit status 0, as if it had trained: a --resume with no step left
// before the run's --steps or --epochs is refused (exit status 2), saying where the checkpoint
// stands and which flag to raise, and the checkpoint is left as it was.
TEST_CASE("resume: a checkpoint already at the run's end is refused, naming the flag to raise") {
  const fs::path dir = temp_dir("resume-at-end");
  const std::vector<std::string> base = recipe(dir, "cpu:0", {"--checkpoint-dir",
                                                              (dir / "ckpt").string()});
  std::vector<std::string> first = base;
  first.insert(first.end(), {"--steps", "12"});  // 10 batches an epoch: step 12 is in epoch 2
  run_train_ok(first);
  const std::string saved = slurp(dir / "ckpt" / "checkpoint.safetensors");
  const auto refused = [&](std::vector<std::string> extra, const std::string& says) {
    std::vector<std::string> args = base;
    args.push_back("--resume");
    args.insert(args.end(), extra.begin(), extra.end());
    const Run r = run_train(args);
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(r.output.find("done:") == std::string::npos);
  };
  refused({"--steps", "12"}, "is at step 12 (1 epoch complete), at or past the --steps 12 this "
                             "run asks for: nothing to train; raise --steps to continue");
  refused({"--steps", "5"}, "at or past the --steps 5");
  refused({"--epochs", "1"}, "is at step 12 (1 epoch complete), at or past the end of the "
                             "--epochs 1 this run asks for: nothing to train; raise --epochs");
  CHECK(slurp(dir / "ckpt" / "checkpoint.safetensors") == saved);
  // One step left is trained.
  std::vector<std::string> more = base;
  more.insert(more.end(), {"--resume", "--steps", "13"});
  CHECK(run_train_ok(more).output.find("done: 1 step") != std::string::npos);
}

TEST_CASE("resume: another model, other settings, a damaged file are refused with what differs") {
  const fs::path dir = temp_dir("refuse");
  const std::string ckpt = (dir / "ckpt").string();
  run_train_ok(recipe(dir, "cpu:0", {"--steps", "3", "--checkpoint-dir", ckpt}));
  const fs::path file = dir / "ckpt" / "checkpoint.safetensors";

  std::string other = kSmallModel;
  other.replace(other.find("filters=4"), 9, "filters=5");
  Run r = run_train({"--model", write_file(dir / "other.model", other), "--data", "synthetic",
                     "--synthetic-count", "320", "--batch", "32", "--devices", "cpu:0",
                     "--checkpoint-dir", ckpt, "--resume"});
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("of another model: line 3 of the model differs") != std::string::npos);
  CHECK(r.output.find("filters=5") != std::string::npos);

  r = run_train(recipe(dir, "cpu:0", {"--lr", "0.01", "--checkpoint-dir", ckpt, "--resume"}));
  CHECK(r.status == 2);
  CHECK(r.output.find("lr: checkpoint 0.001") != std::string::npos);

  // Truncated: half the file.
  const auto size = fs::file_size(file);
  fs::copy_file(file, dir / "whole.safetensors");
  fs::resize_file(file, size / 2);
  r = run_train(recipe(dir, "cpu:0", {"--checkpoint-dir", ckpt, "--resume"}));
  CHECK(r.status == 2);
  CHECK(r.output.find("corrupt checkpoint") != std::string::npos);

  // A parameters file is not a checkpoint.
  run_train_ok(recipe(dir, "cpu:0", {"--steps", "1", "--save", file.string()}));
  r = run_train(recipe(dir, "cpu:0", {"--checkpoint-dir", ckpt, "--resume"}));
  CHECK(r.status == 2);
  CHECK(r.output.find("not a brigade-train checkpoint") != std::string::npos);
}

// Once "resumed ... at step 3 (epoch 1, batch 3)" then "done: 0 steps" and exit status 0: a
// checkpoint of 128 samples (4 batches an epoch) resumed on 64 (2 batches), whose epoch had no
// batch 3. The recipe records the training set's size; a checkpoint written before it did
// resumes as before.
TEST_CASE("resume: a checkpoint of another training set is refused, naming both sizes") {
  const fs::path dir = temp_dir("other-data");
  const std::string ckpt = (dir / "ckpt").string();
  const fs::path file = dir / "ckpt" / "checkpoint.safetensors";
  const std::string model = write_file(dir / "small.model", kSmallModel);
  const std::string larger = fashion_dir(dir / "d128", 128, 128),
                    smaller = fashion_dir(dir / "d64", 64, 64);
  const auto args = [&](const std::string& data, const std::string& steps, bool resume) {
    std::vector<std::string> a = {"--model", model, "--data-dir", data, "--batch", "32",
                                  "--devices", "cpu:0", "--checkpoint-dir", ckpt, "--steps", steps};
    if (resume) a.push_back("--resume");
    return a;
  };
  run_train_ok(args(larger, "3", false));
  const std::string saved = slurp(file);
  const Run r = run_train(args(smaller, "10", true));
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("was written by a run with other settings") != std::string::npos);
  CHECK(r.output.find("train_samples: checkpoint 128, this run 64") != std::string::npos);
  CHECK(r.output.find("done:") == std::string::npos);
  CHECK(slurp(file) == saved);
  CHECK(run_train_ok(args(larger, "4", true)).output.find("done: 1 step") != std::string::npos);

  namespace st = brigade::safetensors;
  st::File old = st::read_file(file.string());
  REQUIRE(old.metadata.erase("recipe.train_samples") == 1);
  std::vector<st::TensorToWrite> tensors;
  for (const st::TensorInfo& t : old.tensors)
    tensors.push_back({t.name, t.dtype, t.shape, old.bytes(t)});
  st::write_file(file.string(), tensors, old.metadata);
  CHECK(run_train_ok(args(larger, "5", true)).output.find("done: 1 step") != std::string::npos);
}

// A run killed after its last checkpoint has written --metrics lines of steps the resumed run
// does again: the resumed run cuts them, so the file holds each step once, its losses those of
// an uninterrupted run (step_losses checks the numbering 1, 2, 3, ...).
TEST_CASE("resume: --metrics lines past the checkpoint's step are replaced, not repeated") {
  const fs::path dir = temp_dir("resume-metrics");
  const auto [a, b, c] = resume_runs(dir, "cpu:0", {}, 8);
  run_train_ok(a);
  run_train_ok(b);
  {  // what the killed run wrote after its checkpoint at step 4
    std::ofstream killed(dir / "b.jsonl", std::ios::app);
    killed << R"({"kind":"step","step":5,"epoch":0,"batch":5,"loss":999.0})" << '\n'
           << R"({"kind":"step","step":6,"epoch":0,"batch":6,"loss":999.0})" << '\n';
  }
  run_train_ok(c);
  const std::vector<double> whole = step_losses(dir / "a.jsonl");
  const std::vector<double> pieces = step_losses(dir / "b.jsonl");
  REQUIRE(pieces.size() == 8);
  CHECK(pieces == whole);
}

// A run killed as it wrote a --metrics line leaves that line without its end: the resumed run
// drops it (appended to, it glued its first line onto it, and brigade-plot refused the file).
// A file that is no --metrics output at all is refused before the run, and left as it was.
TEST_CASE("resume: a --metrics line cut short is dropped; a file not of --metrics is refused") {
  const fs::path dir = temp_dir("resume-metrics-cut");
  const auto [a, b, c] = resume_runs(dir, "cpu:0", {}, 4);
  run_train_ok(a);
  run_train_ok(b);
  {
    std::ofstream killed(dir / "b.jsonl", std::ios::app);
    killed << R"({"kind":"step","step":3,"ep)";
  }
  run_train_ok(c);
  CHECK(step_losses(dir / "b.jsonl") == step_losses(dir / "a.jsonl"));

  const std::string foreign = "notes about this run\n";
  write_file(dir / "notes.txt", foreign);
  std::vector<std::string> d = recipe(dir, "cpu:0", {});
  d.insert(d.end(), {"--steps", "6", "--metrics", (dir / "notes.txt").string(),
                     "--checkpoint-dir", (dir / "ckpt").string(), "--resume"});
  const Run refused = run_train(d);
  CAPTURE(refused.output);
  CHECK(refused.status != 0);
  CHECK(refused.output.find((dir / "notes.txt").string() +
                            ":1: not a line of brigade-train's --metrics output") !=
        std::string::npos);
  CHECK(refused.output.find("done:") == std::string::npos);
  std::ifstream kept(dir / "notes.txt");
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == foreign);
}

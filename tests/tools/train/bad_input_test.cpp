// Every bad input named in issue 6 gets one clear message and exit status 2 from the built
// brigade-train (refused before the first step: issue 20 made every such refusal 2, where a
// malformed model file, missing data or a missing GPU gave 1), never a crash (a signal) or a
// hang (meson's timeout).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "tests/tools/data/idx_files.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
using brigade::testing::Bytes;
using brigade::testing::gzip;
using brigade::testing::idx_bytes;
namespace fs = std::filesystem;

namespace {
// Synthetic data and the small model: the bad input is then the only thing wrong.
std::vector<std::string> quick(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "256",
                                   "--batch", "32", "--devices", "cpu:0", "--steps", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void check_refused(const Run& r, int status, const std::string& says) {
  CAPTURE(r.output);
  CHECK(r.status == status);
  CHECK(r.output.find(says) != std::string::npos);
  CHECK(r.output.find("brigade-train") != std::string::npos);  // our message, not a crash
}
}  // namespace

TEST_CASE("bad input: the quick run itself is fine") {
  const fs::path dir = temp_dir("ok");
  const Run r = run_train(quick(dir, {}));
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("test accuracy") != std::string::npos);
}

// The no-GPU notice of a CUDA build on a machine without one: nothing when only CPU devices
// are asked for, one short line when `auto` looks for a GPU and finds none.
TEST_CASE("the no-GPU notice: absent for CPU devices, one short line for auto") {
  if (brigade::cuda_device_count() > 0) return;  // there is a GPU (or an emulated one) here
  const fs::path dir = temp_dir("notice");
  const Run cpu = run_train(quick(dir, {}));
  CAPTURE(cpu.output);
  CHECK(cpu.output.find("GPU here") == std::string::npos);
#if defined(BRIGADE_HAVE_CUDA)
  const Run autos = run_train(quick(dir, {"--devices", "auto"}));
  CAPTURE(autos.output);
  const size_t at = autos.output.find("brigade: no GPU here");
  REQUIRE(at != std::string::npos);
  const std::string line = autos.output.substr(at, autos.output.find('\n', at) - at);
  CHECK(line.size() <= 72);
#endif
}

// A GPU asked for by name on a machine (or a build) without one: one refusal that says why,
// not a notice that the run goes on with CPU devices followed by the refusal.
TEST_CASE("the no-GPU refusal: --devices cuda:0 says why, in its one message") {
  if (brigade::cuda_device_count() > 0) return;  // there is a GPU (or an emulated one) here
  const Run r = run_train({"--devices", "cuda:0", "--steps", "1"});
  check_refused(r, 2, "\"cuda:0\": this machine has no usable CUDA device (" +
                          brigade::no_gpu_reason() + ")");
  CHECK(!brigade::no_gpu_reason().empty());
  CHECK(r.output.find("CPU devices only") == std::string::npos);
  CHECK(r.output.find("GPU here") == std::string::npos);
}

TEST_CASE("bad input: unknown flag") {
  check_refused(run_train({"--learning-rate", "0.1"}), 2, "--learning-rate");
}

TEST_CASE("bad input: --microbatches 0") {
  check_refused(run_train({"--microbatches", "0"}), 2, "at least 1 micro-batch");
}

TEST_CASE("bad input: garbage sizes and numbers") {
  check_refused(run_train({"--device-memory", "256Mb"}), 2, "invalid size '256Mb'");
  check_refused(run_train({"--device-memory", "10q"}), 2, "--device-memory: invalid size '10q'");
  check_refused(run_train({"--batch", "many"}), 2, "--batch");
  // Once an lr of 0 that trained nothing (exit 0), and infinities that failed at step 2.
  const fs::path dir = temp_dir("numbers");
  for (const char* lr : {"1e-400", "1e400", "inf"})
    check_refused(run_train(quick(dir, {"--lr", lr})), 2, "--lr: ");
  check_refused(run_train(quick(dir, {"--weight-decay", "inf"})), 2, "--weight-decay: ");
  check_refused(run_train(quick(dir, {"--seed", "-1"})), 2, "--seed: must not be negative");
}

TEST_CASE("bad input: more stages than layers") {
  const fs::path dir = temp_dir("stages");
  const std::string model =
      write_file(dir / "two.model", "input 28x28x1\nflatten\ndense units=10 activation=softmax\n");
  check_refused(run_train({"--model", model, "--data", "synthetic", "--synthetic-count", "64",
                           "--devices", "cpu:0,cpu:1,cpu:2"}),
                2, "only 2 layers");
}

TEST_CASE("bad input: more chunks than layers, named before the micro-batches they would need") {
  // 2 devices x 64 chunks are 128 stages of a 5-layer model: it was once reported as "--batch
  // 32 is smaller than the 256 micro-batches", and 2^30 chunks over 4 devices overflowed an
  // int to 0 stages and failed inside the partitioner.
  const fs::path dir = temp_dir("chunks");
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule",
                                      "interleaved-1f1b", "--chunks", "64", "--balance", "flops"})),
                2, "128 stages (2 devices x 64 chunks) but the model has only 5 layers");
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1,cpu:2,cpu:3", "--schedule",
                                      "interleaved-1f1b", "--chunks", "1073741824", "--balance",
                                      "flops"})),
                2, "4294967296 stages (4 devices x 1073741824 chunks) but the model has only 5");
}

// --chunks without a cut by cost was refused naming --balance alone (without flops), and the
// default schedule, 1F1B, then refused the chunks: both are said at once, and the command the
// refusal describes runs.
TEST_CASE("bad input: --chunks with neither a cut by cost nor a schedule of several chunks") {
  const fs::path dir = temp_dir("chunks-schedule");
  const std::vector<std::string> two = {"--devices", "cpu:0,cpu:1", "--chunks", "2"};
  std::vector<std::string> asked = two;
  asked.insert(asked.end(), {"--microbatches", "2"});
  check_refused(run_train(quick(dir, asked)), 2,
                "add --balance flops|params|memory|time and a schedule of several stages per "
                "device (--schedule 1f1b places one: e.g. --schedule interleaved-1f1b)");
  asked.insert(asked.end(), {"--balance", "flops", "--schedule", "interleaved-1f1b"});
  const Run fixed = run_train(quick(dir, asked));
  CAPTURE(fixed.output);
  CHECK(fixed.status == 0);
  std::vector<std::string> looped = two;  // a schedule that takes chunks: --balance alone
  looped.insert(looped.end(), {"--schedule", "interleaved-1f1b"});
  const Run r = run_train(quick(dir, looped));
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("add --balance flops|params|memory|time\n") != std::string::npos);
}

// An instruction set the CPU kernels do not have, refused before a device runs: it was said
// as a failed task of an internal stream ("cpu:1048576 stream#1: task failed: ...").
TEST_CASE("bad input: BRIGADE_CPU_ISA that names no instruction set") {
  const fs::path dir = temp_dir("isa");
  const Run r = run_command("BRIGADE_CPU_ISA=bogus " + train_command(quick(dir, {})));
  check_refused(r, 2, "BRIGADE_CPU_ISA=bogus is not an instruction set of the CPU kernels");
  CHECK(r.output.find("stream#") == std::string::npos);
}

TEST_CASE("bad input: a checkpoint directory that holds a checkpoint, without --resume") {
  // A second run of the same command without --resume would have replaced the first run's
  // checkpoint at its first save.
  const fs::path dir = temp_dir("ckpt-exists");
  const std::vector<std::string> run = quick(dir, {"--checkpoint-dir", (dir / "ckpt").string()});
  const Run first = run_train(run);
  CAPTURE(first.output);
  REQUIRE(first.status == 0);
  const fs::path saved = dir / "ckpt" / "checkpoint.safetensors";
  REQUIRE(fs::exists(saved));
  const auto written = fs::last_write_time(saved);
  const uintmax_t size = fs::file_size(saved);
  check_refused(run_train(run), 2,
                "--checkpoint-dir '" + (dir / "ckpt").string() + "' already holds a checkpoint (" +
                    saved.string() + "): add --resume to continue that run");
  CHECK(fs::last_write_time(saved) == written);
  CHECK(fs::file_size(saved) == size);
  std::vector<std::string> resumed = run;
  resumed.insert(resumed.end(), {"--resume", "--steps", "4"});
  const Run again = run_train(resumed);
  CAPTURE(again.output);
  CHECK(again.status == 0);
}

// An empty checkpoint.safetensors (a `touch`, a copy cut short) was called a checkpoint, and
// the --resume the message suggested was then refused as corrupt.
TEST_CASE("bad input: a checkpoint directory whose checkpoint file is none names no --resume") {
  const fs::path dir = temp_dir("ckpt-empty");
  const fs::path file = dir / "ckpt" / "checkpoint.safetensors";
  fs::create_directories(file.parent_path());
  write_file(file, "");
  const Run r = run_train(quick(dir, {"--checkpoint-dir", (dir / "ckpt").string()}));
  check_refused(r, 2,
                "--checkpoint-dir '" + (dir / "ckpt").string() + "' holds " + file.string() +
                    ", which does not read as a brigade-train checkpoint (");
  CHECK(r.output.find("a new run would replace it; remove it, or give another directory") !=
        std::string::npos);
  CHECK(r.output.find("--resume") == std::string::npos);
  CHECK(fs::file_size(file) == 0);  // left as it was
}

TEST_CASE("bad input: cuda:0 without a GPU") {
  if (brigade::cuda_device_count() > 0) return;  // it exists here
  check_refused(run_train({"--devices", "cuda:0"}), 2, "cuda:0");
}

// TF32 is the vendor libraries' on GPUs (kernels/math_mode.h): anywhere else, refused before
// the first step, never trained in fp32 under tf32's name.
TEST_CASE("bad input: --math tf32 where the devices compute fp32 only") {
  const fs::path dir = temp_dir("math");
  check_refused(run_train(quick(dir, {"--math", "tf32"})), 2,
                "--math tf32: math mode tf32 needs tensor cores: cpu:0 is a CPU device");
  check_refused(run_train(quick(dir, {"--math", "bf16"})), 2, "--math: bf16 not in {fp32,tf32}");
  if (brigade::cuda_device_count() == 0) return;  // the hand-written path needs a GPU
  const Run r = run_command("BRIGADE_CUDA_PATH=handwritten " + train_binary() +
                            " --data synthetic --synthetic-count 256 --batch 32 --steps 1"
                            " --devices cuda:0 --math tf32");
  check_refused(r, 2, "the handwritten CUDA path of cuda:0 computes in fp32 only");
}

TEST_CASE("bad input: a batch smaller than the micro-batch count") {
  const fs::path dir = temp_dir("mb");
  check_refused(run_train(quick(dir, {"--batch", "4", "--microbatches", "8"})), 2,
                "--batch 4 is smaller than the 8 micro-batches");
}

TEST_CASE("bad input: a schedule that holds more activations than --max-activations") {
  // 1F1B over two devices holds 2 micro-batches on device 0 (its warm-up); a V's chunks are
  // counted as halves of a device's share.
  const fs::path dir = temp_dir("budget");
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule", "1f1b",
                                      "--microbatches", "4", "--max-activations", "1"})),
                2,
                "--max-activations 1: schedule 1f1b holds up to 2 micro-batches' activations on "
                "device 0 (cpu:0, bound 1)");
  // One bound per device: 1F1B holds 2 on device 0 and 1 on device 1 (p = 2).
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule", "1f1b",
                                      "--microbatches", "4", "--max-activations", "1,2"})),
                2,
                "--max-activations 1,2: schedule 1f1b holds up to 2 micro-batches' activations "
                "on device 0 (cpu:0, bound 1)");
  const Run fits = run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule", "1f1b",
                                         "--microbatches", "4", "--max-activations", "2,1"}));
  CAPTURE(fits.output);
  CHECK(fits.status == 0);
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule", "1f1b",
                                      "--max-activations", "2,1,1"})),
                2, "--max-activations has 3 counts for 2 devices (cpu:0,cpu:1): give one count, "
                   "or one per device");
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--schedule", "zb-v",
                                      "--microbatches", "4", "--max-activations", "1"})),
                2, "schedule zb-v holds up to 2 micro-batches' activations on device 0");
}

TEST_CASE("bad input: --threads-per-device with a count per device, but not one per device") {
  const fs::path dir = temp_dir("threads");
  check_refused(run_train(quick(dir, {"--devices", "cpu:0,cpu:1", "--threads-per-device",
                                      "1,1,1"})),
                2, "--threads-per-device has 3 counts for 2 devices (cpu:0,cpu:1)");
}

TEST_CASE("bad input: data directory missing, data file truncated") {
  const fs::path dir = temp_dir("data");
  const Run missing = run_train({"--data-dir", (dir / "nowhere").string()});
  check_refused(missing, 2, (dir / "nowhere").string());
  // A name with a space and a quote reaches brigade-train whole (run_binary.h quotes it).
  const std::string odd = (dir / "it's nowhere").string();
  check_refused(run_train({"--data-dir", odd}), 2, odd);

  // Four IDX files whose training images stop short of what their header says.
  const auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)};
  };
  const std::string images = be32(0x803) + be32(10) + be32(28) + be32(28) + std::string(100, '\0');
  const std::string labels = be32(0x801) + be32(10) + std::string(10, '\0');
  write_file(dir / "train-images-idx3-ubyte", images);
  write_file(dir / "train-labels-idx1-ubyte", labels);
  write_file(dir / "t10k-images-idx3-ubyte", images);
  write_file(dir / "t10k-labels-idx1-ubyte", labels);
  check_refused(run_train({"--data-dir", dir.string()}), 2, "truncated");

  // A damaged download: one byte changed in the middle of the gzip'd training images. Said to
  // be corrupt, naming the file (tests/tools/data/idx_test.cpp tries every byte).
  const fs::path gz = temp_dir("data-gz");
  Bytes pixels(100 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * i % 251);
  Bytes packed = gzip(idx_bytes({100, 28, 28}, pixels));
  packed[packed.size() / 2] ^= 0x10;
  const std::string damaged = gz / "train-images-idx3-ubyte.gz";
  write_file(damaged, std::string(packed.begin(), packed.end()));
  write_file(gz / "train-labels-idx1-ubyte", be32(0x801) + be32(100) + std::string(100, '\0'));
  check_refused(run_train({"--data-dir", gz.string()}), 2,
                "IDX file '" + damaged + "': corrupt gzip stream (zlib: ");
}

TEST_CASE("bad input: malformed model files") {
  const fs::path dir = temp_dir("model");
  const std::string typo = write_file(dir / "typo.model",
                                      "input 28x28x1\nconv2d filter=32 kernel=3\n");
  check_refused(run_train({"--model", typo, "--data", "synthetic"}), 2, "typo.model:2:");
  const std::string misfit = write_file(dir / "misfit.model",
                                        "input 28x28x1\nflatten\ndense units=7\n");
  check_refused(run_train({"--model", misfit, "--data", "synthetic", "--synthetic-count", "64"}),
                2, "the model's output is (1, 7) but synthetic");
  check_refused(run_train({"--model", "no_such_model"}), 2, "no_such_model");
}

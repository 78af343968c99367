// Before the first step (tools/train/preflight.h): a wrong output path, a huge thread count,
// batch or layer count is refused with exit status 2, the limit and why — and no step ran (no
// progress line, which always holds "loss"), where before issue 20 the run trained to its end
// and then failed, or starved the machine.
#include <doctest/doctest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "layers/model/safetensors.h"
#include "layers/param_file.h"
#include "tests/support/small_disk.h"
#include "tests/tools/train/run_binary.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"
#include "tools/train/preflight.h"

using namespace brigade::train::test;
using brigade::testing::SmallDisk;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> quick(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "256",
                                   "--batch", "32", "--devices", "cpu:0", "--steps", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Refused with status 2 and `says`, before any step.
void check_refused_early(const Run& r, const std::string& says) {
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(says) != std::string::npos);
  CHECK(r.output.find("loss") == std::string::npos);  // no step, no evaluation
}

}  // namespace

TEST_CASE("preflight: an output that cannot be written is refused before the first step") {
  const fs::path dir = temp_dir("outputs");
  const std::string nodir = (dir / "nodir").string();
  const std::string file = write_file(dir / "file", "x");
  check_refused_early(run_train(quick(dir, {"--save", nodir + "/x.safetensors"})),
                      "--save '" + nodir + "/x.safetensors': the directory '" + nodir +
                          "' does not exist");
  check_refused_early(run_train(quick(dir, {"--save", dir.string()})),
                      "--save '" + dir.string() + "' is a directory");
  check_refused_early(run_train(quick(dir, {"--save-initial", dir.string() + "/"})),
                      "--save-initial '" + dir.string() + "/' is a directory");
  check_refused_early(run_train(quick(dir, {"--trace", nodir + "/x.svg"})),
                      "--trace '" + nodir + "/x.svg': the directory");
  check_refused_early(run_train(quick(dir, {"--metrics", dir.string()})),
                      "--metrics '" + dir.string() + "' is a directory");
  // --metrics is written from the first step on: the message says nothing of "its end".
  const Run metrics = run_train(quick(dir, {"--metrics", nodir + "/run.jsonl"}));
  check_refused_early(metrics, "--metrics '" + nodir + "/run.jsonl': the directory '" + nodir +
                                   "' does not exist (create it first: brigade-train creates no "
                                   "directories, and checks every output before the first step");
  CHECK(metrics.output.find("only at its end") == std::string::npos);
  check_refused_early(run_train(quick(dir, {"--checkpoint-dir", file})),
                      "--checkpoint-dir '" + file + "' is a file, not a directory");
  check_refused_early(run_train(quick(dir, {"--checkpoint-dir", file + "/ckpt"})),
                      "'" + file + "' is a file, so the directory cannot be made");
  // A checkpoint directory to be made under an existing one is fine, and is made.
  const Run ok = run_train(quick(dir, {"--checkpoint-dir", (dir / "a" / "b").string()}));
  CAPTURE(ok.output);
  CHECK(ok.status == 0);
  CHECK(fs::exists(dir / "a" / "b" / "checkpoint.safetensors"));
}

// A file is written beside its name and renamed over it (engine/output_file.h: WholeFile), so
// its directory must be writable, whether or not the file is: --save into a read-only directory
// holding a writable file once passed the check, trained, and failed at the end. Root may write
// anywhere, so as root the run is made as `nobody` (where setpriv can switch to it).
TEST_CASE("preflight: a file written by rename needs a writable directory, not just the file") {
  std::string as_user;
  if (::geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) {
      MESSAGE("SKIP: root, and no setpriv to run as nobody (root may write anywhere)");
      return;
    }
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp ";
  }
  using fs::perms;
  const fs::path dir = temp_dir("read-only-dir"), locked = dir / "locked";
  fs::create_directories(locked);
  const perms everyone_reads = perms::owner_all | perms::group_read | perms::group_exec |
                               perms::others_read | perms::others_exec;
  fs::permissions(dir.parent_path(), everyone_reads);
  fs::permissions(dir, everyone_reads);
  const std::string save = write_file(locked / "p.safetensors", "");
  const std::string metrics = write_file(locked / "m.jsonl", "");
  const perms everyone_writes = perms::owner_read | perms::owner_write | perms::group_read |
                                perms::group_write | perms::others_read | perms::others_write;
  fs::permissions(save, everyone_writes);
  fs::permissions(metrics, everyone_writes);
  const std::string command = as_user + train_command(quick(dir, {}));
  fs::permissions(dir / "small.model", everyone_reads);
  fs::permissions(locked, perms::owner_read | perms::owner_exec | perms::group_read |
                              perms::group_exec | perms::others_read | perms::others_exec);
  check_refused_early(run_command(command + " --save " + save),
                      "--save '" + save + "': not writable (the directory '" + locked.string() +
                          "' does not allow replacing the file)");
  // --metrics grows in place: a writable file is enough.
  const Run grows = run_command(command + " --metrics " + metrics);
  CAPTURE(grows.output);
  CHECK(grows.status == 0);
  fs::permissions(locked, perms::owner_all, fs::perm_options::add);
}

TEST_CASE("preflight: space for a file is compared with what its file system has free") {
  const fs::path dir = temp_dir("space");
  struct statvfs s {};
  REQUIRE(::statvfs(dir.c_str(), &s) == 0);
  const uint64_t free = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  // The same file system, asked about a file not made yet.
  CHECK(brigade::train::free_bytes((dir / "not" / "yet.safetensors").string()) / 1048576 ==
        doctest::Approx(static_cast<double>(free) / 1048576).epsilon(0.01));
  CHECK_NOTHROW(brigade::train::check_space("--save", (dir / "x").string(), 1024, "a file"));
  CHECK_THROWS_WITH_AS(
      brigade::train::check_space("--save", (dir / "x").string(), free + (uint64_t{1} << 40),
                                  "the parameters' file"),
      doctest::Contains("the parameters' file needs"), brigade::train::UsageError);
}

// /proc has no blocks, so 0 bytes free: --save /proc/x (as root, for whom /proc is writable)
// was refused for want of space, which no cleaning up would find.
TEST_CASE("preflight: a file system that reports no storage is named so, not as full") {
  for (const char* path : {"/proc/brigade.safetensors", "/sys/brigade/ckpt"})
    CHECK_THROWS_WITH_AS(brigade::train::check_space("--save", path, 1, "the parameters' file"),
                         doctest::Contains("' is on a file system that reports no storage at all "
                                           "(as /proc and /sys do, where no file is written)"),
                         brigade::train::UsageError);
}

// What the check asks for is what the files take: a checkpoint of a 21 KB model once needed
// "1.0 MiB" (a fixed margin for the header), so runs that fit were refused.
TEST_CASE("preflight: the space asked for a checkpoint and for --save is what the files take") {
  const fs::path dir = temp_dir("sizes");
  for (const std::string optimizer : {"adam", "sgd"}) {
    CAPTURE(optimizer);
    const fs::path run_dir = dir / optimizer;
    fs::create_directories(run_dir);
    std::vector<std::string> flags = {"--optimizer", optimizer,
                                      "--save", (run_dir / "p.safetensors").string(),
                                      "--checkpoint-dir", (run_dir / "ckpt").string()};
    if (optimizer == "sgd") flags.insert(flags.end(), {"--momentum", "0.9"});
    const Run r = run_train(quick(run_dir, flags));
    CAPTURE(r.output);
    REQUIRE(r.status == 0);
    const brigade::model::ModelSpec spec = brigade::model::load_model_file((run_dir / "small.model").string());
    // --save: exactly the file's size.
    CHECK(brigade::safetensors::file_size(brigade::layers::parameter_layout(spec)) ==
          fs::file_size(run_dir / "p.safetensors"));
    // A checkpoint, from the run's recipe (as the checkpoint recorded it): never less than the
    // file, and at most the 80 bytes of counters taken at their widest more.
    const brigade::safetensors::File checkpoint =
        brigade::safetensors::read_file((run_dir / "ckpt" / "checkpoint.safetensors").string());
    brigade::train::Recipe recipe;
    for (const auto& [key, value] : checkpoint.metadata)
      if (key.starts_with("recipe.")) recipe[key.substr(7)] = value;
    brigade::train::Options options;
    options.optimizer = optimizer;
    options.momentum = 0.9;
    const uint64_t asked = brigade::train::checkpoint_file_size(
        spec, recipe, brigade::train::optimizer_state_prefixes(options));
    const uint64_t written = fs::file_size(run_dir / "ckpt" / "checkpoint.safetensors");
    CHECK(asked >= written);
    CHECK(asked <= written + 80);
  }
}

// A run that saves more than one checkpoint into a directory without one writes the second
// beside the first before the rename: it needs room for two, and once passed a check for one,
// trained, and failed at its second checkpoint. A run that replaces a checkpoint already there
// (--resume), or saves once, needs room for one more: the old file's blocks are taken already.
TEST_CASE("preflight: a checkpoint written beside the run's own first one needs room for two") {
  // 508,810 parameters: an SGD checkpoint of 1.9 MiB; two do not fit 3.5 MiB.
  SmallDisk disk("two-checkpoints", 3584 << 10);
  if (!disk.mounted()) {
    MESSAGE("SKIP: " << disk.why());
    return;
  }
  const fs::path dir = temp_dir("two-checkpoints");
  const std::string wide = write_file(dir / "wide.model",
                                      "input 28x28x1\nflatten\ndense units=640 activation=relu\n"
                                      "dense units=10 activation=softmax\n");
  const std::string ckpt = (disk.path() / "ckpt").string();
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--model", wide, "--data", "synthetic", "--synthetic-count",
                                     "128", "--batch", "8", "--optimizer", "sgd", "--devices",
                                     "cpu:0", "--checkpoint-dir", ckpt};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_train(args);
  };
  check_refused_early(run({"--steps", "3", "--checkpoint-every", "1"}),
                      "--checkpoint-dir '" + ckpt + "': a second checkpoint written beside " +
                          "the first (two at once) needs ");
  CHECK_FALSE(fs::exists(ckpt));
  // One checkpoint, at the end: room for one.
  const Run once = run({"--steps", "1"});
  CAPTURE(once.output);
  REQUIRE(once.status == 0);
  // Replacing it needs room for one more beside it, which this disk has not.
  check_refused_early(run({"--steps", "3", "--checkpoint-every", "1", "--resume"}),
                      "--checkpoint-dir '" + ckpt + "': a checkpoint (parameters and optimizer " +
                          "state) needs ");
}

TEST_CASE("preflight: --threads-per-device is bounded by a multiple of the cores") {
  const fs::path dir = temp_dir("threads");
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int limit = brigade::train::kMaxThreadsPerCore * cores;
  check_refused_early(run_train(quick(dir, {"--threads-per-device", "100000"})),
                      "--threads-per-device 100000: at most " + std::to_string(limit) + " (" +
                          std::to_string(brigade::train::kMaxThreadsPerCore) + " x the " +
                          std::to_string(cores) + " hardware threads of this machine)");
  const Run at_limit = run_train(quick(dir, {"--threads-per-device", std::to_string(limit)}));
  CAPTURE(at_limit.output);
  CHECK(at_limit.status == 0);
}

TEST_CASE("preflight: a model of more than 10,000 layers is refused as it is read; 10,000 train") {
  const fs::path dir = temp_dir("layers");
  // Pooled to one pixel first, so that 10,000 layers cost little memory.
  const auto deep = [&](size_t relus) {
    std::string text = "input 28x28x1\nmaxpool2d pool=28x28\nflatten\n";
    for (size_t i = 0; i < relus; ++i) text += "relu\n";
    return text + "dense units=10 activation=softmax\n";
  };
  check_refused_early(run_train(quick(dir, {"--model", write_file(dir / "60k.model", deep(60000))})),
                      "more than 10000 layers, the limit for a model file");
  const Run ok = run_train(quick(dir, {"--model", write_file(dir / "10k.model", deep(9997)),
                                       "--steps", "1"}));
  CAPTURE(ok.output.substr(0, 2000));
  CHECK(ok.status == 0);
  CHECK(ok.output.find("more than 10000 layers") == std::string::npos);
}

TEST_CASE("preflight: a batch that cannot fit a device or this machine is refused before allocating") {
  const fs::path dir = temp_dir("memory");
  check_refused_early(run_train(quick(dir, {"--device-memory", "256KiB"})),
                      "--batch 32: cpu:0 would hold about");
  check_refused_early(run_train(quick(dir, {"--device-memory", "256KiB"})), "(--device-memory)");
  // 65,536 channels of 28x28 per sample: 205 MB of one activation; twice this machine's memory
  // in samples cannot fit, whatever the machine.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t rows = 2 * (pages * page / (28 * 28 * 65536 * 4)) + 1;
  const std::string wide = write_file(dir / "wide.model",
                                      "input 28x28x1\nconv2d filters=65536 kernel=1x1\n"
                                      "maxpool2d pool=28x28\nflatten\n"
                                      "dense units=10 activation=softmax\n");
  check_refused_early(run_train({"--model", wide, "--data", "synthetic", "--synthetic-count",
                                 std::to_string(rows), "--batch", std::to_string(rows),
                                 "--devices", "cpu:0", "--steps", "1"}),
                      "of memory; with ");
  // A batch larger than the data set is the whole set, and the evaluation is one test batch
  // (it allocated --batch rows of test images: std::bad_alloc for 100,000,000).
  const Run whole = run_train(quick(dir, {"--batch", "100000000", "--steps", "1"}));
  CAPTURE(whole.output);
  CHECK(whole.status == 0);
  CHECK(whole.output.find("test accuracy") != std::string::npos);
}

// Pipeline devices that are one device (stages sharing a GPU) share its memory: their loads are
// summed before the comparison, never each compared with the whole device.
TEST_CASE("preflight: the loads of pipeline devices that are one device are summed") {
  using brigade::pipeline::DeviceLoad;
  constexpr int kIndex = 57;  // a CPU device no other case uses, of 1 MiB
  brigade::configure_cpu_device(kIndex, {.threads = 1, .capacity_bytes = 1 << 20});
  const brigade::Device device = brigade::Device::cpu(kIndex);
  const DeviceLoad stage{device, 400 << 10, 200 << 10, 0};  // 600 KiB: fits alone
  CHECK_NOTHROW(brigade::train::check_step_fits({stage}, 32, 32));
  // Two stages there: 1200 KiB of a 1024 KiB device, refused naming the device once.
  std::string message;
  try {
    brigade::train::check_step_fits({stage, stage}, 32, 32);
  } catch (const brigade::train::UsageError& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("--batch 32: cpu:57 would hold about") != std::string::npos);
  CHECK(message.find("(--device-memory)") != std::string::npos);
  // Another device beside it is its own: 600 KiB on each of two devices fit.
  brigade::configure_cpu_device(kIndex + 1, {.threads = 1, .capacity_bytes = 1 << 20});
  const DeviceLoad other{brigade::Device::cpu(kIndex + 1), 400 << 10, 200 << 10, 0};
  CHECK_NOTHROW(brigade::train::check_step_fits({stage, other}, 32, 32));
  brigade::configure_cpu_device(kIndex, {});
  brigade::configure_cpu_device(kIndex + 1, {});
}

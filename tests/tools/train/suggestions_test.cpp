// Every command brigade-train prints runs (tools/train/suggested_command.h): the imbalance
// warning's command is taken from the output and run as printed, in one process, after a
// --resume (whose checkpoint fixes the micro-batch count), and none is printed where its step
// would not fit the devices' memory; so is the command after the warning for devices sharing
// cores; the flags (and, for a checkpoint under another name, the copy) that --init-from of a
// checkpoint points to continue that run, in a directory whose name a shell must have quoted.
// (A checkpoint directory already used points to --resume: bad_input_test runs that.) The
// question's network has a third block of 0.6 % of the work, so its default three devices
// always warn. The commands for runs under mpirun are suggestions_mpirun_test's.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/tools/train/run_binary.h"

using namespace brigade::train;
using brigade::train::test::command_after;
using brigade::train::test::Run;
namespace fs = std::filesystem;

namespace {

const char* kImbalance = "warning: cpu:2 has 0.6 % of the work";

// The command printed on the line after the imbalance warning ("" when there is none).
std::string suggestion_in(const std::string& output) { return command_after(output, kImbalance); }

// A quick run of the question's network: 1 step of 32 synthetic samples.
const std::string kQuick = " --data synthetic --synthetic-count 128 --batch 32 --steps 1";
// In one process, on the three CPU devices its model file asks for: named, so that a machine
// with GPUs (where the default devices are its GPUs) runs the same test. (Under --distributed,
// each rank's device is a CPU device unless --devices cuda says otherwise.)
const std::string kThreeCpus = " --devices cpu:0,cpu:1,cpu:2";
std::string quick_args() { return kQuick + kThreeCpus; }

}  // namespace

TEST_CASE("suggestions: the imbalance warning's command runs as printed, on fewer devices") {
  const Run r = test::run_command(test::train_binary() + quick_args());
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string fix = suggestion_in(r.output);
  CHECK(fix == test::train_binary() + kQuick + " --devices cpu:0,cpu:1 --balance flops");
  const Run balanced = test::run_command(fix);
  CAPTURE(balanced.output);
  CHECK(balanced.status == 0);
  CHECK(balanced.output.find("of the work") == std::string::npos);  // no imbalance warning
}

TEST_CASE("suggestions: after --resume, the command keeps the checkpoint's micro-batch count") {
  const fs::path dir = test::temp_dir("suggest-resume"), kept = test::temp_dir("suggest-kept");
  const std::string base = test::train_binary() + quick_args() + " --checkpoint-dir " + dir.string();
  REQUIRE(test::run_command(base).status == 0);  // step 1 on 3 devices: auto = 6 micro-batches
  fs::copy(dir, kept, fs::copy_options::recursive | fs::copy_options::overwrite_existing);

  const std::string resume_on = test::train_binary() + " --data synthetic --synthetic-count 128 "
                                "--batch 32 --steps 2 --devices ";
  const std::string resume =
      resume_on + "cpu:0,cpu:1,cpu:2 --checkpoint-dir " + dir.string() + " --resume";
  const Run r = test::run_command(resume);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string fix = suggestion_in(r.output);
  // On 2 devices auto would be 4 micro-batches, which the checkpoint refuses.
  CHECK(fix == resume_on + "cpu:0,cpu:1 --checkpoint-dir " + dir.string() +
                   " --resume --balance flops --microbatches 6");

  // Run it from the same checkpoint as the warned run: it resumes and trains step 2.
  fs::copy(kept, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const Run balanced = test::run_command(fix);
  CAPTURE(balanced.output);
  CHECK(balanced.status == 0);
  CHECK(balanced.output.find("resumed from") != std::string::npos);
  CHECK(balanced.output.find("done: 1 step") != std::string::npos);
  CHECK(balanced.output.find("of the work") == std::string::npos);  // no imbalance warning
  fs::remove_all(dir);
  fs::remove_all(kept);
}

// A resumed run that does not fit its memory: more micro-batches or a smaller batch would
// change the checkpoint's recipe, and that command was refused as another run's. The refusal
// says what can fit it instead.
TEST_CASE("suggestions: a --resume too large for --device-memory names no recipe change") {
  const fs::path dir = test::temp_dir("suggest-resume-memory");
  const std::string base = test::train_binary() +
                           " --data synthetic --synthetic-count 512 --devices cpu:0"
                           " --checkpoint-dir " + dir.string();
  REQUIRE(test::run_command(base + " --steps 2").status == 0);
  const Run r = test::run_command(base + " --steps 4 --resume --device-memory 150MiB");
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("but has 150.0 MiB (--device-memory): a --resume keeps its checkpoint's "
                      "--batch and micro-batches, so it fits only on more devices or with more "
                      "memory") != std::string::npos);
  CHECK(r.output.find("--microbatches") == std::string::npos);
  fs::remove_all(dir);
}

namespace {
// The text of `output` between `from` and the next `to` ("" when `from` is not in it).
std::string between(const std::string& output, const std::string& from, const std::string& to) {
  const size_t at = output.find(from);
  if (at == std::string::npos) return "";
  const size_t start = at + from.size();
  return output.substr(start, output.find(to, start) - start);
}
}  // namespace

// A directory with a space in its name: what the message prints is quoted for a shell.
TEST_CASE("suggestions: --init-from given a checkpoint names the --resume that continues it") {
  const fs::path dir = test::temp_dir("suggest-init");
  const std::string base = test::train_binary() +
                           " --data synthetic --synthetic-count 128 --batch 32 --devices cpu:0";
  const std::string ckpt = (dir / "run 1").string();
  REQUIRE(test::run_command(base + " --steps 1 --checkpoint-dir '" + ckpt + "'").status == 0);
  const Run refused = test::run_command(base + " --steps 2 --init-from '" + ckpt +
                                        "/checkpoint.safetensors'");
  CAPTURE(refused.output);
  REQUIRE(refused.status == 2);
  // The flags it gives, in --init-from's place, continue the run: step 2 after step 1.
  const std::string flags = between(refused.output, "to continue that run, give ", ";");
  CHECK(flags == "--checkpoint-dir '" + ckpt + "' --resume");
  const Run resumed = test::run_command(base + " --steps 2 " + flags);
  CAPTURE(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("resumed from " + ckpt) != std::string::npos);
  CHECK(resumed.output.find("done: 1 step") != std::string::npos);
  fs::remove_all(dir);
}

// --resume reads DIR/checkpoint.safetensors alone: a checkpoint kept under another name is
// copied into a directory of its own first, by the command the message gives, run as printed.
TEST_CASE("suggestions: --init-from of a checkpoint under another name says how to resume it") {
  const fs::path dir = test::temp_dir("suggest-init-renamed");
  const std::string base = test::train_binary() +
                           " --data synthetic --synthetic-count 128 --batch 32 --devices cpu:0";
  const fs::path run = dir / "run 1";
  REQUIRE(test::run_command(base + " --steps 1 --checkpoint-dir '" + run.string() + "'").status ==
          0);
  const fs::path kept = run / "step 1.safetensors";
  fs::rename(run / "checkpoint.safetensors", kept);
  const Run refused = test::run_command(base + " --steps 2 --init-from '" + kept.string() + "'");
  CAPTURE(refused.output);
  REQUIRE(refused.status == 2);
  CHECK(refused.output.find("--resume reads only a --checkpoint-dir's checkpoint.safetensors") !=
        std::string::npos);
  const std::string copy = between(refused.output, "copy it into a directory of its own: ",
                                   ", then give ");
  const std::string flags = between(refused.output, ", then give ", ";");
  const std::string resume_dir = (run / "step 1-resume").string();
  CHECK(copy == "mkdir '" + resume_dir + "' && cp '" + kept.string() + "' '" + resume_dir +
                    "/checkpoint.safetensors'");
  CHECK(flags == "--checkpoint-dir '" + resume_dir + "' --resume");
  const Run copied = test::run_command(copy);
  CAPTURE(copied.output);
  REQUIRE(copied.status == 0);
  const Run resumed = test::run_command(base + " --steps 2 " + flags);
  CAPTURE(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("done: 1 step") != std::string::npos);
  CHECK(fs::exists(kept));  // the file given stays as it was: the copy is the one resumed
  fs::remove_all(dir);
}

// Two CPU devices of different speeds given more threads than the machine has cores: the
// warning's command gives them as many threads as cores, the faster device still the faster
// where whole threads allow, and runs without the warning. (Not under mpirun: --distributed
// refuses one count per device, so its ranks never share cores this way.)
TEST_CASE("suggestions: devices sharing cores: the command with as many threads as cores runs") {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string run = test::train_binary() + kQuick + " --devices cpu:0,cpu:1 --balance flops";
  // cores + 1 and 1 threads: cores + 2 in all, more than the cores.
  const Run r = test::run_command(run + " --threads-per-device " + std::to_string(cores + 1) + ",1");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string fix = command_after(r.output, "hardware threads: the devices take turns");
  // Scaled by cores / (cores + 2): (cores + 1) cores / (cores + 2) = cores - 1 and a remainder
  // of 2 / (cores + 2), so cores - 1 (at least 1) and 1: together at most the cores.
  CHECK(fix == run + " --threads-per-device " + std::to_string(std::max(1, cores - 1)) + ",1");
  const Run fewer = test::run_command(fix);
  CAPTURE(fewer.output);
  CHECK(fewer.status == 0);
  CHECK(fewer.output.find("hardware threads") == std::string::npos);  // no warning
}

TEST_CASE("suggestions: a step too large for --device-memory: the command that fits runs") {
  // The run that once passed the preflight and ran out of memory at 1BW0 on cpu:1 (there with
  // 24 MiB, where no count of this run fits: memory_test.cpp), given 48 MiB: refused, with more
  // micro-batches (or a smaller batch) that fit, and that command passes the preflight and runs
  // its step.
  const std::string run = test::train_binary() +
                          " --data synthetic --synthetic-count 256 --steps 1 --batch 48 "
                          "--device-memory 48MiB --threads-per-device 1" + kThreeCpus;
  const Run r = test::run_command(run);
  CAPTURE(r.output);
  REQUIRE(r.status == 2);
  CHECK(r.output.find("but has 48.0 MiB (--device-memory)") != std::string::npos);
  const std::string fix = command_after(r.output, "it fits:");
  REQUIRE(!fix.empty());
  // This run's words, with micro-batches added or the batch changed in place: more micro-batches
  // are tried first, and whether any count fits depends on where the stages are cut, which
  // follows the layers' times measured on the machine (a 16-core machine got a smaller batch).
  const size_t batch_at = fix.find(" --batch ");
  REQUIRE(batch_at != std::string::npos);
  const std::string fix_batch = fix.substr(batch_at, fix.find(' ', batch_at + 9) - batch_at);
  std::string same_words = run;
  same_words.replace(same_words.find(" --batch 48"), 11, fix_batch);
  CAPTURE(same_words);
  CHECK(fix.starts_with(same_words));
  CHECK((fix.find("--microbatches ") != std::string::npos || fix.find("--batch ") != std::string::npos));
  const Run fits = test::run_command(fix);
  CAPTURE(fits.output);
  CHECK(fits.status == 0);
  CHECK(fits.output.find("out of memory") == std::string::npos);
}

namespace {
// Three device blocks: a cheap convolution (6.8 % of the forward FLOPs), a costly one (93.1 %),
// and a tail of no FLOPs worth naming (0.1 %) but of many activations, 32 ReLUs of 24x24x16
// each. No cut over 3 devices gives each 5 %; over 2, the costly convolution and the tail
// share cpu:1, which then holds both stages' activations, in larger micro-batches (4 in place
// of 6), than any device of the 3 does.
std::string heavy_tail_model() {
  std::string text = "input 28x28x1\n"
                     "device 0\n"
                     "conv2d filters=32 kernel=3x3 activation=relu\n"  // -> 26x26x32
                     "device 1\n"
                     "conv2d filters=16 kernel=3x3 activation=relu\n"  // -> 24x24x16
                     "device 2\n";
  for (int i = 0; i < 32; ++i) text += "relu\n";
  return text + "maxpool2d pool=8x8\nflatten\ndense units=10 activation=softmax\n";
}
}  // namespace

// Once the warning named the two-device command however little memory the devices had, and that
// command was refused by the memory check it had not been weighed by; then it named none where
// that check itself would have named more micro-batches. Estimated, a step holds at most 28.0
// MiB on a device of the 3 (the tail's, on cpu:2; the costly convolution's 18.5 MiB holds its
// kernel's workspace, which may differ between machines) and 48.9 MiB on cpu:1 of the 2 at its
// 4 micro-batches: in 40 MiB the 2 need more, the fewest that fit (6 here).
TEST_CASE("suggestions: fewer devices that fit --device-memory only finer are suggested so") {
  const fs::path dir = test::temp_dir("suggest-fewer-memory");
  const std::string model = test::write_file(dir / "heavy-tail.model", heavy_tail_model());
  const Run r = test::run_command(test::train_binary() + " --model " + model + kQuick +
                                  kThreeCpus + " --device-memory 40MiB");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string warning = "warning: cpu:2 has 0.1 % of the work";
  REQUIRE(r.output.find(warning) != std::string::npos);
  CHECK(r.output.find("No cut over 3 devices gives each 5.0 %; over 2, with ") !=
        std::string::npos);
  CHECK(r.output.find(" micro-batches for a step to fit the devices' memory:") !=
        std::string::npos);
  // The command runs as printed, within the memory it names, on 2 devices.
  const std::string fix = command_after(r.output, warning);
  REQUIRE(fix.find(" --devices cpu:0,cpu:1 ") != std::string::npos);
  REQUIRE(fix.find(" --microbatches ") != std::string::npos);
  const Run suggested = test::run_command(fix);
  CAPTURE(suggested.output);
  CHECK(suggested.status == 0);
  CHECK(suggested.output.find("2 stages on 2 devices") != std::string::npos);
}

// A --resume keeps its checkpoint's micro-batches (6 on 3 devices), with which the 2 devices do
// not fit 30 MiB (they need 8): no command is printed, and the warning says why.
TEST_CASE("suggestions: fewer devices that would not fit --device-memory are not suggested") {
  const fs::path dir = test::temp_dir("suggest-fewer-memory-resume");
  const std::string model = test::write_file(dir / "heavy-tail.model", heavy_tail_model());
  const std::string run = test::train_binary() + " --model " + model + kThreeCpus +
                          " --data synthetic --synthetic-count 128 --batch 32 --device-memory "
                          "30MiB --checkpoint-dir " + (dir / "run").string();
  REQUIRE(test::run_command(run + " --steps 1").status == 0);
  const Run r = test::run_command(run + " --steps 2 --resume");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::string warning = "warning: cpu:2 has 0.1 % of the work";
  REQUIRE(r.output.find(warning) != std::string::npos);
  CHECK(r.output.find("No cut over 3 devices gives each 5.0 %; one over 2 would, but a step "
                      "would not fit the devices' memory.") != std::string::npos);
  // No command follows, and whatever did would have to run as printed.
  const std::string fix = command_after(r.output, warning);
  CHECK(fix.empty());
  if (!fix.empty()) {
    const Run suggested = test::run_command(fix);
    CAPTURE(suggested.output);
    CHECK(suggested.status == 0);
  }
  fs::remove_all(dir);
}

// The step fits with many micro-batches, and so must the evaluation after it: it once ran the
// whole --batch (512 rows) forward at once and ran out of memory after training. A test batch
// now has a training micro-batch's rows at most.
TEST_CASE("suggestions: the command that fits --device-memory evaluates within it too") {
  const std::string run = test::train_binary() +
                          " --data synthetic --synthetic-count 1024 --batch 512 --steps 2 "
                          "--devices cpu:0 --device-memory 60MiB";
  const Run r = test::run_command(run);
  CAPTURE(r.output);
  REQUIRE(r.status == 2);
  const std::string fix = command_after(r.output, "it fits:");
  REQUIRE(fix.find("--microbatches ") != std::string::npos);
  const Run fits = test::run_command(fix);
  CAPTURE(fits.output);
  CHECK(fits.status == 0);
  CHECK(fits.output.find("test set: loss") != std::string::npos);  // evaluated
  CHECK(fits.output.find("out of memory") == std::string::npos);
}

TEST_CASE("suggestions: more threads per device than the limit: the command with as many as cores runs") {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string run = test::train_binary() + kQuick + " --devices cpu:0";
  const Run r = test::run_command(run + " --threads-per-device " + std::to_string(4 * cores + 1));
  CAPTURE(r.output);
  REQUIRE(r.status == 2);
  const std::string fix = command_after(r.output, "as many threads as cores:");
  CHECK(fix == run + " --threads-per-device " + std::to_string(cores));
  const Run fewer = test::run_command(fix);
  CAPTURE(fewer.output);
  CHECK(fewer.status == 0);
}

// A list of one entry per device keeps the entries of the devices the command keeps: the
// three devices' --threads-per-device 1,1,1 becomes 1,1 on two (given whole, the command was
// refused for 3 counts on 2 devices), and so does 1 1 1, the list as several words (printed
// once as `1,1 1 1`, refused for 4 counts).
TEST_CASE("suggestions: on fewer devices, per-device lists keep the kept devices' entries") {
  for (const char* list : {"1,1,1", "1 1 1"}) {
    CAPTURE(list);
    const Run r = test::run_command(test::train_binary() + quick_args() +
                                    " --threads-per-device " + list);
    CAPTURE(r.output);
    REQUIRE(r.status == 0);
    const std::string fix = suggestion_in(r.output);
    CHECK(fix == test::train_binary() + kQuick +
                     " --devices cpu:0,cpu:1 --threads-per-device 1,1 --balance flops");
    const Run balanced = test::run_command(fix);
    CAPTURE(balanced.output);
    CHECK(balanced.status == 0);
    CHECK(balanced.output.find("of the work") == std::string::npos);
  }
}

// A flag given twice (the last counts): the command printed is the one that runs on two
// devices, not the warned run again (it was printed with the old value left in).
TEST_CASE("suggestions: a flag given twice is replaced whole") {
  const Run twice = test::run_command(test::train_binary() + kQuick + " --devices cpu:0" +
                                      kThreeCpus);
  CAPTURE(twice.output);
  REQUIRE(twice.status == 0);
  CHECK(suggestion_in(twice.output) ==
        test::train_binary() + kQuick + " --devices cpu:0,cpu:1 --balance flops");
}

// Once a refusal with no way out: which batch sizes divide the set is arithmetic a user should
// not have to do.
TEST_CASE("suggestions: a short last batch names the nearest batch size whose batches all fit") {
  // Two stages, 4 micro-batches a step; 98 samples in batches of 32 leave 98 - 3 x 32 = 2 for
  // the last. 33 (98 = 2 x 33 + 32) and 31 (98 = 3 x 31 + 5) both leave at least 4: a tie,
  // the larger is named.
  const std::string run = test::train_binary() +
                          " --data synthetic --synthetic-count 98 --steps 1 --devices cpu:0,cpu:1";
  const Run r = test::run_command(run + " --batch 32");
  CAPTURE(r.output);
  CHECK(r.status == 2);
  const std::string fix = command_after(r.output, "fewer than the 4 micro-batches");
  CHECK(fix == run + " --batch 33");
  const Run fixed = test::run_command(fix);
  CAPTURE(fixed.output);
  CHECK(fixed.status == 0);
}

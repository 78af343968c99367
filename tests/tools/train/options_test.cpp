// The trainer's command line and placement, without running anything.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tools/train/options.h"
#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"
#include "tools/train/number_flags.h"
#include "tools/train/placement.h"

using namespace brigade::train;

namespace {
std::optional<Options> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "brigade-train");
  return parse_options(static_cast<int>(args.size()), args.data());
}
std::string usage_error(std::vector<const char*> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
// A number check's verdict on a flag's text: "" accepts it, anything else is the refusal that
// follows the flag's name ("--lr: must be greater than 0, got -1").
std::string verdict(const CLI::Validator& check, std::string text) { return check(text); }
}  // namespace

TEST_CASE("number flags: each check says its rule in words, and what a double cannot hold") {
  CHECK(verdict(at_least(0), "0") == "");
  CHECK(verdict(at_least(0), "-3") == "must be at least 0, got -3");
  CHECK(verdict(at_least(0), "inf") == "must be a finite number, got inf");
  CHECK(verdict(above_zero(), "0.001") == "");
  CHECK(verdict(above_zero(), "0") == "must be greater than 0, got 0");
  CHECK(verdict(above_zero(), "1e-400") == "1e-400 is out of range: a double rounds it to 0");
  CHECK(verdict(above_zero(), "1e400") ==
        "1e400 is out of range: more than a double holds (1.8e+308)");
  CHECK(verdict(in_zero_one(), "0.9") == "");
  CHECK(verdict(in_zero_one(), "1") == "must be in [0, 1), got 1");
  CHECK(verdict(at_least(0), "x") == "must be a number, got 'x'");
  CHECK(verdict(whole_number<int64_t>(), "9223372036854775807") == "");
  CHECK(verdict(whole_number<int64_t>(), "9223372036854775808") ==
        "9223372036854775808 is out of range: at most 9223372036854775807");
  CHECK(verdict(whole_number<int64_t>(), "-9223372036854775809") ==
        "-9223372036854775809 is out of range: at least -9223372036854775808");
  CHECK(verdict(whole_number<uint64_t>(), "18446744073709551615") == "");
  CHECK(verdict(whole_number<uint64_t>(), "-1") == "must not be negative, got -1");
  CHECK(verdict(whole_number<uint64_t>(), "18446744073709551616") ==
        "18446744073709551616 is out of range: at most 18446744073709551615");
  CHECK(verdict(whole_number<int>(), "-2147483648") == "");
  CHECK(verdict(whole_number<int>(), "2147483648") ==
        "2147483648 is out of range: at most 2147483647");
  CHECK(verdict(whole_number<int>(), "-2147483649") ==
        "-2147483649 is out of range: at least -2147483648");
  // A smaller bound than the type's is said with its reason, for any text past it.
  for (const char* past : {"1025", "99999999999999999999"})
    CHECK(verdict(whole_number<int64_t>(1024, "a page"), past) ==
          std::string("must be at most 1024 (a page), got ") + past);
  CHECK(verdict(whole_number<int64_t>(1024, "a page"), "1024") == "");
  // C would read "010" as octal 8 and "0x10" as 16, and CLI11 "" as 0.
  for (const char* not_decimal : {"1.5", "010", "0x10", "", "-", "+-1", "1e3", " 7", "7 "})
    CHECK(verdict(whole_number<int64_t>(), not_decimal) ==
          std::string("must be a whole number in decimal, got '") + not_decimal + "'");
  CHECK(verdict(whole_number<int64_t>(), "+7") == "");
  CHECK(verdict(whole_number<int64_t>(), "0") == "");
  CHECK(verdict(whole_number<int64_t>(), "-0") == "");
}

TEST_CASE("parse_size: units by hand") {
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("256MiB") == 256ull * 1024 * 1024);
  CHECK(parse_size("256M") == 256ull * 1024 * 1024);
  CHECK(parse_size("1.5GiB") == 3ull * 512 * 1024 * 1024);
  CHECK(parse_size("512MB") == 512'000'000ull);
  CHECK(parse_size("64k") == 65536);
  CHECK(parse_size("2TB") == 2'000'000'000'000ull);
}

TEST_CASE("parse_size: garbage is refused with the text") {
  for (const char* bad : {"", "MiB", "12 MiB", "12Mb", "-5", "1.5", "0.3B", "1..2M", "99999999999TiB"}) {
    const std::string text = bad;
    CAPTURE(text);
    try {
      parse_size(bad);
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("format_size") {
  CHECK(format_size(512) == "512 B");
  CHECK(format_size(256ull << 20) == "256.0 MiB");
}

TEST_CASE("options: defaults are the question's recipe") {
  const Options o = *parse({});
  CHECK(o.model == "seed_cnn");
  CHECK(o.data == "fashion-mnist");
  CHECK(o.devices == "auto");
  CHECK(o.optimizer == "adam");
  CHECK(o.lr == 1e-3);
  CHECK(o.batch == 128);
  CHECK(o.epochs <= 5);
  CHECK(o.microbatches == 0);  // resolved later from the stage count
  CHECK(o.math == "fp32");     // the CPU devices' arithmetic: parity holds
}

TEST_CASE("options: values are read") {
  const Options o = *parse({"--devices", "cpu:0,cpu:1", "--device-memory", "256MiB", "--batch",
                            "64", "--microbatches", "4", "--optimizer", "sgd", "--momentum",
                            "0.9", "--no-shuffle", "--recompute", "--steps", "10"});
  CHECK(o.devices == "cpu:0,cpu:1");
  CHECK(o.device_memory == 256ull << 20);
  CHECK(o.batch == 64);
  CHECK(o.microbatches == 4);
  CHECK(o.optimizer == "sgd");
  CHECK(o.momentum == 0.9);
  CHECK(o.no_shuffle);
  CHECK(o.recompute);
  CHECK(o.steps == 10);
}

TEST_CASE("options: --help returns nothing to run") { CHECK_FALSE(parse({"--help"}).has_value()); }

TEST_CASE("options: each mistake gets its message") {
  CHECK(usage_error({"--bogus"}).find("--bogus") != std::string::npos);
  CHECK(usage_error({"--microbatches", "0"}).find("at least 1 micro-batch") != std::string::npos);
  CHECK(usage_error({"--device-memory", "lots"}).find("'lots'") != std::string::npos);
  CHECK(usage_error({"--optimizer", "rmsprop"}).find("rmsprop") != std::string::npos);
  CHECK(usage_error({"--schedule", "fast"}).find("fast") != std::string::npos);
  CHECK(usage_error({"--batch", "0"}).find("--batch 0") != std::string::npos);
  CHECK(usage_error({"--resume"}).find("--checkpoint-dir") != std::string::npos);
  CHECK(usage_error({"--momentum", "0.9"}).find("sgd") != std::string::npos);
}

TEST_CASE("options: a flag the rest of the command makes meaningless is refused, not ignored") {
  // Each was once taken and ignored: no checkpoint written, Fashion-MNIST read in full, the
  // synthetic set made (and, with --synthetic-count, a recipe a later --resume refused), no
  // bf16 file written.
  CHECK(usage_error({"--checkpoint-every", "100"}) ==
        "--checkpoint-every needs --checkpoint-dir (where checkpoints go)");
  CHECK(usage_error({"--synthetic-count", "1000"}) ==
        "--synthetic-count is the size of --data synthetic; this run reads fashion-mnist");
  CHECK(usage_error({"--data", "synthetic", "--data-dir", "/tmp"}) ==
        "--data-dir is where Fashion-MNIST is read from; --data synthetic reads no files");
  CHECK(usage_error({"--save-dtype", "bf16", "--save-initial", "init.safetensors"}) ==
        "--save-dtype is the dtype --save writes; this run has no --save (--save-initial and "
        "checkpoints are always fp32)");
  CHECK(parse({"--save", "final.safetensors", "--save-dtype", "bf16"})->save_dtype == "bf16");
  CHECK(parse({"--data", "synthetic", "--synthetic-count", "1000"})->synthetic_count == 1000);
  CHECK(parse({"--checkpoint-dir", "ckpt", "--checkpoint-every", "100"})->checkpoint_every == 100);
}

// Once an allocation failure ("synthetic data set: count must be in 1..2^31") and a batch
// count of 0 ("batch -1 is outside 0..-1"), neither naming the flag.
TEST_CASE("options: --synthetic-count and --batch near their type's limits name the flag") {
  const std::string huge_count = usage_error(
      {"--data", "synthetic", "--synthetic-count", "9223372036854775807"});
  CHECK(huge_count == "--synthetic-count: must be at most 2147483648 (2^31, the most the data "
                      "set holds), got 9223372036854775807 (see --help)");
  // 2^31 samples are within the data set's bound, but 1.8 TiB: more than this machine holds.
  const std::string big_count =
      usage_error({"--data", "synthetic", "--synthetic-count", "2147483648"});
  CHECK(big_count.starts_with("--synthetic-count 2147483648: the synthetic training and test "
                              "sets take 1.8 TiB (788 bytes a sample), more than this machine's"));
  // Past int64_t too, the bound said is the flag's own, not the type's.
  for (const char* huge : {"2147483649", "9223372036854775807", "99999999999999999999"})
    CHECK(usage_error({"--batch", huge}) ==
          std::string("--batch: must be at most 2147483648 (2^31, the largest training set "
                      "brigade-train reads: a batch larger than the training set is one batch of "
                      "all of it), got ") +
              huge + " (see --help)");
  // A batch larger than the training set is one batch of all of it, as before.
  CHECK(parse({"--batch", "100000000"})->batch == 100000000);
  CHECK(parse({"--batch", "2147483648"})->batch == 2147483648);
}

// CLI11 reads a double with strtold and narrows it without a word: "1e-400" became an lr of 0
// (a run that trained nothing, exit 0), "1e400" and "inf" an infinite one (a run that failed at
// step 2, advising a smaller --lr). An integer it reads with strtoll/strtoull, which clamp what
// is too large and negate a "-1" into 2^64 - 1 for the unsigned --seed.
TEST_CASE("options: a number out of its type's range, not finite, or a negative seed is refused") {
  CHECK(usage_error({"--lr", "1e-400"}) ==
        "--lr: 1e-400 is out of range: a double rounds it to 0 (see --help)");
  CHECK(usage_error({"--lr", "1e400"}) ==
        "--lr: 1e400 is out of range: more than a double holds (1.8e+308) (see --help)");
  CHECK(usage_error({"--lr", "inf"}) == "--lr: must be a finite number, got inf (see --help)");
  CHECK(usage_error({"--lr", "nan"}) == "--lr: must be a finite number, got nan (see --help)");
  CHECK(usage_error({"--weight-decay", "inf"}) ==
        "--weight-decay: must be a finite number, got inf (see --help)");
  CHECK(usage_error({"--weight-decay", "1e400"}).starts_with("--weight-decay: 1e400 is out of"));
  CHECK(usage_error({"--clip-grad-norm", "-inf"}).starts_with("--clip-grad-norm: must be a "));
  CHECK(usage_error({"--momentum", "1e-999"}).starts_with("--momentum: 1e-999 is out of range"));
  CHECK(usage_error({"--seed", "-1"}) == "--seed: must not be negative, got -1 (see --help)");
  CHECK(usage_error({"--seed", "18446744073709551616"}) ==
        "--seed: 18446744073709551616 is out of range: at most 18446744073709551615 (see --help)");
  CHECK(usage_error({"--steps", "99999999999999999999"}) ==
        "--steps: 99999999999999999999 is out of range: at most 9223372036854775807 (see --help)");
  CHECK(usage_error({"--device-memory", "10q"}).starts_with("--device-memory: invalid size '10q'"));
  CHECK(usage_error({"--epochs", "99999999999"}) ==
        "--epochs: 99999999999 is out of range: at most 2147483647 (see --help)");
  CHECK(usage_error({"--max-activations", "2,2000000"}) ==
        "--max-activations: must be at most 1048576 (2^20), got 2000000 (see --help)");
  // What a double or an int64 holds is taken as it is.
  CHECK(parse({"--lr", "1e-300"})->lr == 1e-300);
  CHECK(parse({"--seed", "18446744073709551615"})->seed == 18446744073709551615u);
  CHECK(parse({"--steps", "9223372036854775807"})->steps == 9223372036854775807);
}

// CLI11's own message for a value it cannot convert listed every value of a flag given twice
// ("Could not convert: --batch = 5,x"), and read "010" as octal: --batch 010 trained batches
// of 8. Each number flag now says which text is not its number, in its own words.
TEST_CASE("options: a number flag's text that is no number is named alone, in decimal") {
  CHECK(usage_error({"--batch", "64", "--batch", "x"}) ==
        "--batch: must be a whole number in decimal, got 'x' (see --help)");
  CHECK(usage_error({"--lr", "0.1", "--lr", "fast"}) ==
        "--lr: must be a number, got 'fast' (see --help)");
  CHECK(usage_error({"--batch", "010"}) ==
        "--batch: must be a whole number in decimal, got '010' (see --help)");
  CHECK(usage_error({"--threads-per-device", "1,1.5"}) ==
        "--threads-per-device: must be a whole number in decimal, got '1.5' (see --help)");
  for (const char* flag : {"--epochs", "--chunks", "--data-parallel", "--seed", "--steps",
                           "--eval-every", "--print-every", "--checkpoint-every",
                           "--synthetic-count", "--max-activations"})
    CHECK(usage_error({flag, "2", flag, "2.5"}) ==
          std::string(flag) + ": must be a whole number in decimal, got '2.5' (see --help)");
  // Every value given is checked, as the ranges were, not only the last (which counts).
  CHECK(usage_error({"--batch", "x", "--batch", "64"}) ==
        "--batch: must be a whole number in decimal, got 'x' (see --help)");
  CHECK(parse({"--batch", "32", "--batch", "64"})->batch == 64);
}

namespace {
brigade::model::ModelSpec three_blocks() {
  return brigade::model::parse_model(
      "input 8\n"
      "device 0\ndense units=4 activation=relu\n"
      "device 1\ndense units=4 activation=relu\ndense units=4 activation=relu\n"
      "device 2\ndense units=3\n",
      "three.model");
}
}  // namespace

TEST_CASE("placement: auto without a GPU is one CPU device per block") {
  if (brigade::cuda_device_count() > 0) return;  // auto means the GPUs there
  Options o;
  const RunDevices d = choose_devices(o, three_blocks());
  CHECK(d.devices ==
        std::vector<brigade::Device>{brigade::Device::cpu(0), brigade::Device::cpu(1),
                                     brigade::Device::cpu(2)});
}

TEST_CASE("placement: auto on GPUs is the GPUs the cut can use") {
  const int gpus = brigade::cuda_device_count();
  if (gpus == 0) return;  // auto means CPU devices here (the case above)
  const auto first_gpus = [](int n) {
    std::vector<brigade::Device> d;
    for (int i = 0; i < n; ++i) d.push_back(brigade::Device::cuda(i));
    return d;
  };
  Options o;
  // By blocks: one GPU per block at most (3 blocks), not a refusal on a machine with more.
  CHECK(choose_devices(o, three_blocks()).devices == first_gpus(std::min(gpus, 3)));
  CHECK(choose_devices(o, brigade::model::parse_model("input 8\ndense units=3\n", "one.model"))
            .devices == first_gpus(1));
  // By cost: one GPU per layer at most (4 layers).
  o.balance = "flops";
  CHECK(choose_devices(o, three_blocks()).devices == first_gpus(std::min(gpus, 4)));
  // --device-memory on GPUs alone limits nothing: refused, saying why (it said "has none").
  o.devices = "cuda:0";
  o.device_memory = 1 << 20;
  CHECK_THROWS_WITH_AS(choose_devices(o, three_blocks()),
                       "--device-memory limits CPU devices, and cuda:0 names none (a GPU's "
                       "memory is its own)",
                       UsageError);
}

TEST_CASE("placement: impossible device lists") {
  Options o;
  const auto error = [&](const std::string& devices) -> std::string {
    o.devices = devices;
    try {
      choose_devices(o, three_blocks());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(error("cpu:0,cpu:1,cpu:2,cpu:3,cpu:4").find("only 4 layers") != std::string::npos);
  CHECK(error("cpu:0,cpu:1,cpu:2,cpu:3").find("3 device blocks") != std::string::npos);
  // The refusal names every cost --balance cuts by (it once left out flops, the one the docs
  // recommend), and each of them places the four devices.
  const std::string hint = error("cpu:0,cpu:1,cpu:2,cpu:3");
  REQUIRE(hint.find("--balance ") != std::string::npos);
  const std::string costs = hint.substr(hint.find("--balance ") + 10);
  for (const char* cost : {"flops", "params", "memory", "time"}) {
    CAPTURE(cost);
    CHECK(costs.find(cost) != std::string::npos);
    o.balance = cost;
    CHECK(error("cpu:0,cpu:1,cpu:2,cpu:3") == "(no error)");
  }
  o.balance = "blocks";
  CHECK(error("cpu:0,cpu:0").find("twice") != std::string::npos);
  CHECK(error("gpu0").find("gpu0") != std::string::npos);
  if (brigade::cuda_device_count() == 0)
    CHECK(error("cuda:0").find("cuda:0") != std::string::npos);
}

TEST_CASE("placement: --math tf32 is set for GPUs on the vendor path, refused elsewhere") {
  using brigade::Device, brigade::MathMode;
  const auto error = [](const std::string& math, const std::vector<Device>& devices) {
    try {
      use_math_mode(math, devices);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // The path is a process-wide setting, which CI's runs set through BRIGADE_CUDA_PATH: this
  // test sets each one it checks, and puts the run's own back at the end.
  const brigade::CudaPath path = brigade::cuda_path();
  brigade::set_cuda_path(brigade::CudaPath::vendor);
  CHECK(error("tf32", {Device::cuda(0), Device::cpu(0)}) ==
        "--math tf32: math mode tf32 needs tensor cores: cpu:0 is a CPU device, which computes "
        "in fp32 only (use --math fp32, the default)");
  CHECK(brigade::math_mode() == MathMode::fp32);  // a refusal sets nothing
  brigade::set_cuda_path(brigade::CudaPath::handwritten);
  CHECK(error("tf32", {Device::cuda(1)}).find("the handwritten CUDA path of cuda:1 computes in "
                                              "fp32 only") != std::string::npos);
  brigade::set_cuda_path(brigade::CudaPath::vendor);
  CHECK(error("tf32", {Device::cuda(0), Device::cuda(1)}) == "(no error)");
  CHECK(brigade::math_mode() == MathMode::tf32);
  CHECK(error("fp32", {Device::cpu(0)}) == "(no error)");
  CHECK(brigade::math_mode() == MathMode::fp32);
  brigade::set_cuda_path(path);
}

TEST_CASE("placement: a thread count per device makes devices of different speeds") {
  Options o;
  o.devices = "cpu:0,cpu:1,cpu:2";
  o.threads_per_device = {2, 1, 1};
  const RunDevices uneven = choose_devices(o, three_blocks());
  CHECK(uneven.threads == std::vector<int>{2, 1, 1});
  CHECK_FALSE(uneven.uniform());
  CHECK(uneven.describe_threads() == "threads per CPU device: 2, 1, 1");
  o.threads_per_device = {1};
  const RunDevices alike = choose_devices(o, three_blocks());
  CHECK(alike.uniform());
  CHECK(alike.describe_threads() == "1 thread per CPU device");
}

TEST_CASE("parse_size: a number too long for a double is refused, not thrown past main") {
  // Found by tests/fuzz (fuzz_cli, corpus/cli/crash-device-memory-400-digits): std::stod
  // threw std::out_of_range here.
  const std::string huge = "1" + std::string(400, '0');
  CHECK_THROWS_WITH_AS(parse_size(huge), doctest::Contains("larger than 2^64 bytes"), UsageError);
  CHECK_THROWS_WITH_AS(parse_size("20000000TiB"), doctest::Contains("larger than 2^64 bytes"), UsageError);
}

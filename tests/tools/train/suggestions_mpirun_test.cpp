// The commands brigade-train prints for runs under mpirun run as printed
// (tools/train/suggested_command.h): the imbalance warning's command of a job, which keeps
// mpirun and gives a rank per device; and the command a --distributed run started without
// mpirun gives, with a device list or a model of one device block too. Every case here runs
// mpirun: meson runs them as a test of their own, one job at a time (`*: under mpirun*`).
// The commands printed for one process are suggestions_test's.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "tests/tools/train/run_binary.h"

using namespace brigade::train;
using brigade::train::test::command_after;
using brigade::train::test::Run;
namespace fs = std::filesystem;

namespace {
// A quick run of the question's network: 1 step of 32 synthetic samples, a rank per device.
const std::string kQuickRun = " --data synthetic --synthetic-count 128 --batch 32 --steps 1";
}  // namespace

TEST_CASE("suggestions: under mpirun, the command keeps mpirun, one rank per device, no --devices") {
  if (!test::have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  // 3 ranks on this machine's cores: --oversubscribe, as the docs say.
  const std::string train = test::train_binary() + " --distributed" + kQuickRun;
  const Run r = test::run_command("mpirun --allow-run-as-root --oversubscribe -np 3 " + train);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  // Each rank knows only its own device: the warning names the rank (rank 2's device is cpu:2
  // of its own process).
  const std::string fix = command_after(r.output, "warning: rank 2 has 0.6 % of the work");
  CHECK(fix.starts_with("mpirun "));
  CHECK(fix.ends_with(" -np 2 " + train + " --balance flops"));
  const Run balanced = test::run_command(fix);
  CAPTURE(balanced.output);
  CHECK(balanced.status == 0);
  CHECK(balanced.output.find("2 stages on 2 ranks") != std::string::npos);
  CHECK(balanced.output.find("of the work") == std::string::npos);  // no imbalance warning
}

// `--distributed` started without mpirun: the refusal gives this command under mpirun, the
// program as it was invoked (not a `brigade-train` looked up on PATH), with the flag Open MPI
// needs as root, and it runs as printed.
TEST_CASE("suggestions: --distributed without mpirun names the command to run: under mpirun") {
  if (!test::have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  const std::string train = test::train_binary() + " --distributed" + kQuickRun;
  const Run r = test::run_command(train);
  CAPTURE(r.output);
  REQUIRE(r.status == 2);
  CHECK(r.output.find("not started by mpirun") != std::string::npos);
  const std::string fix = command_after(r.output, "not started by mpirun");
  CHECK(fix == std::string("mpirun ") + (::geteuid() == 0 ? "--allow-run-as-root " : "") +
                   (2 > static_cast<int>(std::thread::hardware_concurrency()) ? "--oversubscribe "
                                                                             : "") +
                   "-np 2 " + train);
  const Run ran = test::run_command(fix);
  CAPTURE(ran.output);
  CHECK(ran.status == 0);
  CHECK(ran.output.find("2 stages on 2 ranks") != std::string::npos);
}

// The command under mpirun runs as printed where the run named devices (a list --distributed
// refuses: the command says cpu, one per rank) with a count per device (kept for the ranks
// that run), and for a model of one device block (one rank: two were refused, "the model has
// 1 device block").
TEST_CASE("suggestions: --distributed with a device list, or one block: under mpirun, as printed") {
  if (!test::have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  const fs::path dir = test::temp_dir("suggest-mpirun");
  const std::string one_block = test::write_file(
      dir / "one.model", "input 28x28x1\ndevice 0\nflatten\ndense units=10 activation=softmax\n");
  const struct {
    std::string flags, expected, ranks;
  } cases[] = {
      {" --devices cpu:0,cpu:1,cpu:2 --max-activations 2,1,1",
       " --devices cpu --max-activations 2,1", "-np 2 "},
      {" --model " + one_block, " --model " + one_block, "-np 1 "},
  };
  for (const auto& c : cases) {
    CAPTURE(c.flags);
    const std::string train = test::train_binary() + " --distributed" + kQuickRun;
    const Run r = test::run_command(train + c.flags);
    CAPTURE(r.output);
    REQUIRE(r.status == 2);
    const std::string fix = command_after(r.output, "not started by mpirun");
    CHECK(fix.find(c.ranks + train + c.expected) != std::string::npos);
    const Run ran = test::run_command(fix);
    CAPTURE(ran.output);
    CHECK(ran.status == 0);
  }
}

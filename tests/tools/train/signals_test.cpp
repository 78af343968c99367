// tools/train/signals.h: a second SIGINT or SIGTERM, while a checkpoint is being written, ends
// the program at once and leaves nothing behind — the temporary the checkpoint was going to,
// `checkpoint.safetensors.tmp.<pid>`, is removed before the signal's default action. The
// interruption is injected: a forked child installs the trainer's handlers, starts the file
// exactly as save_checkpoint does (engine/output_file.h's WholeFile), and signals itself
// twice in the middle of it.
#include "tools/train/signals.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/output_file.h"
#include "tests/tools/train/run_binary.h"

namespace fs = std::filesystem;

namespace {

// Child exit statuses that say where it went wrong (the signal should end it before any).
constexpr int kFirstSignalIgnored = 3;
constexpr int kSurvivedSecondSignal = 4;

// Forks a child that writes part of DIR/checkpoint.safetensors, then is sent `first` and
// `second`; returns the child's wait status.
int interrupted_writer(const fs::path& dir, int first, int second) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    brigade::train::install_stop_handlers();
    brigade::WholeFile file((dir / "checkpoint.safetensors").string());
    file.write("the first tensors of a checkpoint");
    std::raise(first);  // "please stop": the run goes on writing its checkpoint
    if (brigade::train::stop_signal() != first) ::_exit(kFirstSignalIgnored);
    file.write("more tensors");
    std::raise(second);  // "stop now"
    ::_exit(kSurvivedSecondSignal);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return status;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("signals: a second signal while a checkpoint is written ends it, no temporary left") {
  const std::pair<int, int> orders[] = {{SIGINT, SIGINT}, {SIGTERM, SIGINT}, {SIGINT, SIGTERM}};
  for (const std::pair<int, int>& order : orders) {
    const int first = order.first, second = order.second;  // not bindings: CAPTURE is a lambda
    CAPTURE(first);
    CAPTURE(second);
    const fs::path dir = brigade::train::test::temp_dir("signal-while-writing");
    const int status = interrupted_writer(dir, first, second);
    CHECK(!WIFEXITED(status));  // not one of the child's own exits
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == second);  // as a shell reports a killed program: 128 + signal
    CHECK(names_in(dir).empty());
  }
}

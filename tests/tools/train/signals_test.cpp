// tools/train/signals.h: a second SIGINT or SIGTERM, while a checkpoint is being written, ends
// the program at once and leaves nothing behind — the temporary the checkpoint was going to,
// `checkpoint.safetensors.tmp.<pid>`, is removed before the signal's default action. The
// interruption is injected: signal_writer.cpp (BRIGADE_SIGNAL_WRITER) installs the trainer's
// handlers, starts the file exactly as save_checkpoint does, and signals itself twice in the
// middle of it. Before the training loop one signal does the same (--save-initial's file).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"

namespace fs = std::filesystem;

namespace {

// Runs signal_writer on DIR with `first` then `second` (0: `first` alone, before the training
// loop); returns its wait status.
int interrupted_writer(const fs::path& dir, int first, int second) {
  const std::string writer = brigade::train::test::tool_binary("BRIGADE_SIGNAL_WRITER");
  std::vector<std::string> args = {writer, dir.string(), std::to_string(first)};
  if (second != 0) args.push_back(std::to_string(second));
  std::vector<char*> argv;  // made before the fork: only async-signal-safe calls after it
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
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
    // Not one of signal_writer's own exits (3: the first signal set no stop flag; 4: it
    // survived the second; 127: it could not be started).
    CHECK_MESSAGE(!WIFEXITED(status), "exit status " << WEXITSTATUS(status));
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == second);  // as a shell reports a killed program: 128 + signal
    CHECK(names_in(dir).empty());
  }
}

// Before the training loop (the data loaded, --save-initial written) a signal ends the run at
// once, as by default; it left the temporary of --save-initial behind, since brigade-train's
// handlers came only after it.
TEST_CASE("signals: a signal before the training loop ends it, no temporary left") {
  for (const int signal : {SIGINT, SIGTERM}) {
    CAPTURE(signal);
    const fs::path dir = brigade::train::test::temp_dir("signal-before-training");
    const int status = interrupted_writer(dir, signal, 0);
    CHECK_MESSAGE(!WIFEXITED(status), "exit status " << WEXITSTATUS(status));
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal);
    CHECK(names_in(dir).empty());
  }
}

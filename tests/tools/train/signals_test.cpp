// tools/train/signals.h: a second SIGINT or SIGTERM, while a checkpoint is being written, ends
// the program at once and leaves nothing behind — the temporary the checkpoint was going to,
// `checkpoint.safetensors.tmp.<pid>`, is removed before the signal's default action. The
// interruption is injected: signal_writer.cpp (BRIGADE_SIGNAL_WRITER) installs the trainer's
// handlers, starts the file exactly as save_checkpoint does, and signals itself twice in the
// middle of it. Before the training loop one signal does the same (--save-initial's file).
// And a first SIGINT sent to brigade-train itself (signal_when: once its output shows a
// marker): between steps it stops the run, whose checkpoint resumes exactly; during an
// evaluation it abandons it and stops too (status 130, no "done").
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tests/tools/train/metrics_file.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
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

// A run of `command` (a program found on PATH, and its arguments) that is sent `sig` once its
// output shows `marker`: its output, and its wait status.
struct Signalled {
  std::string output;
  int status = 0;
};
Signalled signal_command_when(std::vector<std::string> command, const std::string& marker,
                              int sig) {
  std::vector<char*> argv;  // made before the fork: only async-signal-safe calls after it
  for (std::string& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  // Wait (with a deadline, no sleeping) for the child to print the marker.
  Signalled run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (run.output.find(marker) == std::string::npos) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                    "no '" << marker << "' from brigade-train within 120 s; it printed:\n"
                           << run.output);
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    REQUIRE_MESSAGE(n > 0, "brigade-train ended before '" << marker << "':\n" << run.output);
    run.output.append(buf, static_cast<size_t>(n));
  }
  kill(child, sig);
  // Until it exits, within a deadline: a stop that hangs is killed and said, with its output.
  const auto stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    if (std::chrono::steady_clock::now() >= stop_deadline) {
      kill(child, SIGKILL);
      FAIL_CHECK("not ended within 120 s of the signal; it printed:\n" << run.output);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;  // its end of the pipe closed: it exited
    run.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  waitpid(child, &run.status, 0);
  return run;
}

// signal_command_when for brigade-train with `args`.
Signalled signal_when(const std::vector<std::string>& args, const std::string& marker, int sig) {
  std::vector<std::string> command = {train_binary()};
  command.insert(command.end(), args.begin(), args.end());
  return signal_command_when(command, marker, sig);
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

TEST_CASE("resume: SIGINT stops between steps, saves, and the resumed run is exact") {
  const fs::path dir = temp_dir("signal");
  // 60,000 synthetic samples: 5 epochs are 9,375 steps, so the signal lands mid-run. Where it
  // lands depends on how fast the host reads the child's lines (a step of this model takes
  // about a millisecond): the run it is compared with is as long as the stopped one, plus 5.
  std::vector<std::string> base = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--batch", "32", "--devices", "cpu:0",
                                   "--print-every", "1"};

  std::vector<std::string> b = base;
  b.insert(b.end(), {"--metrics", (dir / "b.jsonl").string(), "--checkpoint-dir",
                     (dir / "ckpt").string(), "--checkpoint-every", "0"});
  const Signalled stopped = signal_when(b, "step 5/", SIGINT);
  REQUIRE(WIFEXITED(stopped.status));
  CHECK(WEXITSTATUS(stopped.status) == 130);
  REQUIRE(fs::exists(dir / "ckpt" / "checkpoint.safetensors"));
  const size_t stopped_at = step_losses(dir / "b.jsonl").size();
  REQUIRE(stopped_at >= 5);
  REQUIRE(stopped_at < 9375);  // stopped, not finished
  const std::string steps = std::to_string(std::max<size_t>(30, stopped_at + 5));

  std::vector<std::string> a = base;
  a.insert(a.end(), {"--steps", steps, "--metrics", (dir / "a.jsonl").string()});
  run_train_ok(a);
  std::vector<std::string> c = b;
  c.insert(c.end(), {"--resume", "--steps", steps});
  run_train_ok(c);
  const std::vector<double> whole = step_losses(dir / "a.jsonl"), pieces = step_losses(dir / "b.jsonl");
  REQUIRE(pieces.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    CAPTURE(i);
    CHECK(pieces[i] == whole[i]);
  }
}

// --steps that ends in mid-epoch evaluates the test set before it reports; a SIGINT that comes
// while it does (6,000 test samples of the question's network: seconds) is a stop, said and
// reported so, not a "done" with status 0 (it was swallowed: nothing checked after the loop).
// And an evaluation a signal comes during, the last or one of --eval-every, is abandoned: the
// stop once waited for its end (and printed its test line).
TEST_CASE("resume: SIGINT during an evaluation stops the run at once, status 130") {
  // The evaluation after the last step; one of --eval-every, mid-run.
  for (const char* eval_every : {"0", "1"}) {
    CAPTURE(eval_every);
    const fs::path dir = temp_dir("signal-eval");
    const Signalled r =
        signal_when({"--data", "synthetic", "--synthetic-count", "36000", "--batch", "32",
                     "--devices", "cpu:0", "--steps", eval_every[0] == '0' ? "1" : "3",
                     "--eval-every", eval_every, "--print-every", "1", "--checkpoint-dir",
                     (dir / "ckpt").string()},
                    "step 1/", SIGINT);
    CAPTURE(r.output);
    REQUIRE(WIFEXITED(r.status));
    CHECK(WEXITSTATUS(r.status) == 130);
    CHECK(r.output.find("stopped by SIGINT after step 1") != std::string::npos);
    CHECK(r.output.find("test loss") == std::string::npos);  // abandoned
    CHECK(r.output.find("done:") == std::string::npos);
    CHECK(fs::exists(dir / "ckpt" / "checkpoint.safetensors"));
  }
}

namespace {
// The evaluations of a --metrics file, in order: (step, test loss, test accuracy).
std::vector<std::tuple<int64_t, double, double>> evaluations(const fs::path& metrics) {
  std::ifstream in(metrics);
  REQUIRE_MESSAGE(in.good(), "no metrics file " << metrics);
  std::vector<std::tuple<int64_t, double, double>> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == "eval")
      out.emplace_back(j["step"].get<int64_t>(), j["test_loss"].get<double>(),
                       j["test_accuracy"].get<double>());
  }
  return out;
}
}  // namespace

// A stop at an epoch's end keeps the checkpoint there, its evaluation still due, so that a
// --resume evaluates that epoch first: the stopped and resumed run evaluates as a whole run
// does. Epochs of one step; the signal, sent once the first step's line is out, lands just
// before an epoch's evaluation or during it (which it abandons; trainer.cpp's epochs() takes
// both to the same place), or on a loaded machine an epoch or more later: which, the timing
// decides, so this is no test of one of them alone. Eleven epochs more leave the signal time
// to land in the run (about a second here).
TEST_CASE("resume: a stop at an epoch's end evaluates that epoch on --resume") {
  const fs::path dir = temp_dir("signal-epoch-end");
  const std::vector<std::string> recipe = {
      "--model", write_file(dir / "small.model", kSmallModel), "--data-dir",
      fashion_dir(dir / "data", 32, 5000), "--batch", "32", "--microbatches", "8",
      "--devices", "cpu:0", "--epochs", "12", "--print-every", "1"};
  std::vector<std::string> whole = recipe;
  whole.insert(whole.end(), {"--metrics", (dir / "whole.jsonl").string()});
  run_train_ok(whole);
  std::vector<std::string> pieces = recipe;
  pieces.insert(pieces.end(), {"--metrics", (dir / "pieces.jsonl").string(), "--checkpoint-dir",
                               (dir / "ckpt").string()});
  const Signalled stopped = signal_when(pieces, "step 1/1", SIGINT);
  CAPTURE(stopped.output);
  REQUIRE(WIFEXITED(stopped.status));
  CHECK(WEXITSTATUS(stopped.status) == 130);
  CHECK(stopped.output.find("stopped by SIGINT after step ") != std::string::npos);
  pieces.push_back("--resume");
  run_train_ok(pieces);
  const auto expected = evaluations(dir / "whole.jsonl");
  REQUIRE(expected.size() == 12);  // one at each epoch's end, steps 1 to 12
  CHECK(evaluations(dir / "pieces.jsonl") == expected);
}

// Under mpirun the ranks agreed on a stop after each step only: a SIGTERM during the evaluation
// after the last step was not seen until it ended, and Open MPI killed the ranks first: no
// checkpoint, no word. They agree after each evaluation too, which rank 0 abandons. Open MPI's
// mpirun passes its SIGTERM on odls_base_sigkill_timeout seconds late and kills a rank about as
// long after (tools/train/README.md): 5 s, within an evaluation of 20,000 test samples in
// batches of a micro-batch's 2 rows (about 13 s), and time enough for a sanitizer's slower stop.
TEST_CASE("resume: under mpirun, SIGTERM during the last evaluation stops every rank") {
  if (!have_mpi()) {
    MESSAGE("SKIP: this build has no MPI (--distributed is built where Meson finds it)");
    return;
  }
  const fs::path dir = temp_dir("signal-eval-mpi");
  const Signalled r = signal_command_when(
      {"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "odls_base_sigkill_timeout",
       "5", "-np", "2", train_binary(),
       "--distributed", "--balance", "flops", "--data", "synthetic", "--synthetic-count",
       "120000", "--batch", "8", "--steps", "1", "--print-every", "1", "--checkpoint-dir",
       (dir / "ckpt").string()},
      "step 1/", SIGTERM);
  CAPTURE(r.output);
  CHECK(r.output.find("stopped by SIGTERM after step 1") != std::string::npos);
  CHECK(r.output.find("test loss") == std::string::npos);  // abandoned
  CHECK(r.output.find("done:") == std::string::npos);
  CHECK(fs::exists(dir / "ckpt" / "checkpoint.safetensors"));
}

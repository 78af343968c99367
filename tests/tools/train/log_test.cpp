// The log (tools/train/progress.h): plain lines without control codes wherever no person
// watches a terminal (a pipe, mpirun's pseudo-terminal, TERM=dumb), a line for the first and
// last step even of a short run, the step's loss beside the labelled running mean, and one
// last line with the run's summary — each number checked against --metrics, computed there
// independently of the text.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> quick(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "320",
                                   "--batch", "32", "--devices", "cpu:0",
                                   "--metrics", (dir / "m.jsonl").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<nlohmann::json> lines_of(const fs::path& file, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == kind) out.push_back(j);
  }
  return out;
}

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

TEST_CASE("log: a short run off a terminal prints its first and last step, loss and mean labelled") {
  const fs::path dir = temp_dir("log-short");
  const Run r = run_train(quick(dir, {"--steps", "3"}));  // --print-every 50: no multiple
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::vector<nlohmann::json> steps = lines_of(dir / "m.jsonl", "step");
  REQUIRE(steps.size() == 3);
  // The mean of equal 32-row steps is the plain mean of their losses.
  const double l1 = steps[0]["loss"], l3 = steps[2]["loss"];
  const double mean = (l1 + steps[1]["loss"].get<double>() + l3) / 3;
  CHECK(r.output.find("epoch 1/5 step 1/10  loss " + fixed("%.4f", l1) + "  mean " +
                      fixed("%.4f", l1) + " (steps 1-1)") != std::string::npos);
  CHECK(r.output.find("epoch 1/5 step 3/10  loss " + fixed("%.4f", l3) + "  mean " +
                      fixed("%.4f", mean) + " (steps 1-3)") != std::string::npos);
  CHECK(r.output.find("step 2/10") == std::string::npos);
  CHECK(r.output.find('\r') == std::string::npos);
  CHECK(r.output.find('\033') == std::string::npos);
  // No line ends in a blank (the placement's heading once did, its stages on the lines below).
  CHECK(r.output.find(" \n") == std::string::npos);
}

TEST_CASE("log: the last line is the run's summary, as the metrics have it") {
  const fs::path dir = temp_dir("log-summary");
  const Run r = run_train(quick(dir, {"--steps", "4"}));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::vector<nlohmann::json> steps = lines_of(dir / "m.jsonl", "step");
  const std::vector<nlohmann::json> evals = lines_of(dir / "m.jsonl", "eval");
  REQUIRE(steps.size() == 4);
  REQUIRE(evals.size() == 1);
  std::string last = r.output.substr(0, r.output.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  CHECK(last.starts_with("done: 4 steps in "));
  CHECK(last.find(" samples/s, last loss " + fixed("%.4f", steps[3]["loss"]) +
                  "; test set: loss " + fixed("%.4f", evals[0]["test_loss"]) + ", accuracy " +
                  fixed("%.2f", 100 * evals[0]["test_accuracy"].get<double>()) + "%") !=
        std::string::npos);
}

TEST_CASE("log: after --resume the mean is over the steps this run made, and says which") {
  const fs::path dir = temp_dir("log-resume");
  const std::string ckpt = (dir / "ckpt").string();
  REQUIRE(run_train(quick(dir, {"--steps", "3", "--checkpoint-dir", ckpt})).status == 0);
  const Run r = run_train(quick(dir, {"--steps", "6", "--checkpoint-dir", ckpt, "--resume"}));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("epoch 1/5 step 4/10  loss ") != std::string::npos);
  CHECK(r.output.find("(steps 4-6)") != std::string::npos);
}

TEST_CASE("log: no control codes in a pseudo-terminal under mpirun or with TERM=dumb") {
  const fs::path dir = temp_dir("log-pty");
  const std::string train = train_command(quick(dir, {"--steps", "2"}));
  // script(1) gives the program a pseudo-terminal, as mpirun gives its ranks.
  for (const std::string env : {"OMPI_COMM_WORLD_SIZE=1", "TERM=dumb"}) {
    CAPTURE(env);
    const Run r = run_command("env " + env + " script -qec \"" + train + "\" /dev/null");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("step 2/10") != std::string::npos);
    CHECK(r.output.find('\033') == std::string::npos);
  }
  // A terminal of a person: the live bar.
  const Run live = run_command("env TERM=xterm script -qec \"" + train + "\" /dev/null");
  CHECK(live.output.find("\033[K") != std::string::npos);
}

TEST_CASE("log: the live bar fits an 80-column terminal") {
  const fs::path dir = temp_dir("log-narrow");
  const std::string train = train_command(quick(dir, {"--steps", "3"}));
  // stty sizes script(1)'s pseudo-terminal as a person's 80-column window.
  const Run live = run_command("env TERM=xterm script -qec \"stty cols 80; " + train +
                               "\" /dev/null");
  CAPTURE(live.output);
  REQUIRE(live.status == 0);
  int bars = 0;
  // Each redraw is "\r\033[K" and the line: what follows the code up to the next \r or \n.
  const std::string redraw = "\r\033[K";
  for (size_t at = live.output.find(redraw); at != std::string::npos;
       at = live.output.find(redraw, at + 1)) {
    const size_t begin = at + redraw.size();
    const std::string line = live.output.substr(begin, live.output.find_first_of("\r\n", begin) - begin);
    if (!line.starts_with("epoch ")) continue;
    ++bars;
    CAPTURE(line);
    CHECK(line.size() < 80);
    CHECK(line.find("loss ") != std::string::npos);
  }
  CHECK(bars == 3);
}

TEST_CASE("log: --eval-every names each evaluation by its step, as --metrics records it") {
  const fs::path dir = temp_dir("log-eval");
  const Run r = run_train(quick(dir, {"--steps", "6", "--eval-every", "2"}));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const std::vector<nlohmann::json> evals = lines_of(dir / "m.jsonl", "eval");
  REQUIRE(evals.size() == 3);  // after steps 2, 4 and 6 (the run stops inside epoch 1 of 10 steps)
  for (const nlohmann::json& e : evals) {
    const double loss = e["test_loss"], accuracy = e["test_accuracy"];
    const std::string line = "step " + std::to_string(e["step"].get<int64_t>()) +
                             " (epoch 1): test loss " + fixed("%.4f", loss) +
                             ", test accuracy " + fixed("%.2f", 100 * accuracy) + "%";
    CHECK(r.output.find(line) != std::string::npos);
  }
  CHECK(r.output.find("epoch 1: test") == std::string::npos);
}

TEST_CASE("log: the live bar's ETA counts to the step where --steps stops the run") {
  // The question's network on 6,400 synthetic samples: 200 steps of 32 an epoch, of which
  // --steps 3 runs 3. Counted to the epoch's end, the last bar would say 197 steps' time,
  // seconds on any machine; counted to --steps, nothing is left.
  const fs::path dir = temp_dir("log-eta");
  const std::string args = " --data synthetic --synthetic-count 6400 --batch 32 --devices cpu:0 "
                           "--steps 3";
  const Run live = run_command("env TERM=xterm script -qec \"stty cols 200; " + train_binary() +
                               args + "\" /dev/null");
  CAPTURE(live.output);
  REQUIRE(live.status == 0);
  const size_t last_bar = live.output.rfind("3/200");
  REQUIRE(last_bar != std::string::npos);
  const size_t eta = live.output.find("ETA ", last_bar);
  REQUIRE(eta != std::string::npos);
  CHECK(live.output.substr(eta, 8) == "ETA 0:00");
}

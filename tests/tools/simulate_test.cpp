// brigade-simulate's own values (tools/brigade-simulate.cpp), refused before anything is
// simulated, exit 2, one line each: costs and device weights that are not finite numbers in
// range (NaN and infinity once crashed the lower bound's sort or never ended its loop), a
// schedule list with an empty or unknown name, counts a generator cannot take, and sizes past
// what it simulates in seconds (each of the last three refused after the names before it had
// run) (p = m = 65536,
// both in the flags' ranges, took gigabytes). Under all, a schedule over --max-live is a row
// of the table that says why, and the others run.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/tools/train/run_binary.h"
#include "tools/command_line.h"

using namespace brigade::train::test;

namespace {
// brigade-simulate with `flags`, within a minute (a hang is a failure, not a stuck test).
// (In a subshell: `flags` may redirect its stdout, and its stderr still comes back.)
Run simulate(const std::string& flags) {
  return run_command("(timeout 60 " + tool_binary("BRIGADE_SIMULATE") + " --no-grid " + flags +
                     ")");
}
}  // namespace

TEST_CASE("brigade-simulate: values it cannot simulate are refused, exit 2, before any run") {
  const struct {
    const char* flags;
    const char* says;
  } refused[] = {
      {"--cost comm=nan", "--cost: 'comm=nan' is not a number from 0 to 1e15"},
      {"--cost f=inf", "--cost: 'f=inf' is not a number from 0 to 1e15"},
      {"--cost f=1e308", "--cost: 'f=1e308' is not a number from 0 to 1e15"},
      {"--cost act=-1", "--cost: 'act=-1' is not a number from 0 to 1e15"},
      {"--stages 2 --device-weights 1,nan", "--device-weights: nan is not a number above 0"},
      {"--stages 2 --device-weights 1,-1", "--device-weights: -1 is not a number above 0"},
      {"--stages 2 --device-weights 1,0", "--device-weights: 0 is not a number above 0"},
      {"--stages 2 --device-weights 1,1,1", "--device-weights has 3 values for 2 devices"},
      {"--schedule ''", "--schedule: name a schedule"},
      {"--schedule gpipe,,1f1b", "--schedule: unknown schedule ''"},
      {"--schedule gpipe,nosuch", "--schedule: unknown schedule 'nosuch'"},
      {"--schedule interleaved-1f1b --stages 4 --microbatches 3",
       "micro-batches must be a multiple of the devices"},
      {"--schedule gpipe,interleaved-1f1b --stages 4 --microbatches 3",
       "micro-batches must be a multiple of the devices"},
      {"--schedule gpipe,looped-bfs --stages 1024 --chunks 2 --microbatches 1024",
       "looped-bfs: 1024 stages x 2 chunks x 1024 micro-batches is over 2^20"},
      {"--schedule gpipe --stages 65536 --microbatches 65536",
       "gpipe: 65536 stages x 1 chunk x 65536 micro-batches is over 2^20"},
      {"--schedule looped-bfs --stages 1024 --chunks 2 --microbatches 1024",
       "looped-bfs: 1024 stages x 2 chunks x 1024 micro-batches is over 2^20"},
  };
  for (const auto& r : refused) {
    CAPTURE(r.flags);
    const Run run = simulate(r.flags);
    CAPTURE(run.output);
    CHECK(run.status == brigade::cli::kUsageStatus);
    CHECK(run.output.starts_with("brigade-simulate: "));
    CHECK(run.output.find(r.says) != std::string::npos);
    CHECK(run.output.find("==") == std::string::npos);  // no schedule was simulated first
  }
}

TEST_CASE("brigade-simulate: under all, a schedule over --max-live is a row saying why") {
  const Run run = simulate("--schedule all --stages 2 --microbatches 2 --max-live 1");
  CAPTURE(run.output);
  CHECK(run.status == 0);
  // naive holds one micro-batch at a time and runs; gpipe holds both, and its row says so in
  // one line (the picture of where is the single schedule's refusal).
  CHECK(run.output.find("\nnaive              2  1   2 ") != std::string::npos);
  CHECK(run.output.find("\ngpipe             skipped: schedule 'gpipe' is invalid: device 0 "
                        "holds 2 live activations after 0F1 at device 0 position 2, over the "
                        "bound of 1\n1f1b ") != std::string::npos);
}

// --print-schedule writes the lists on stdout and stops; with --svg or --trace it once stopped
// before the simulation that draws them, and wrote neither file without a word. Now the lists
// are the same as without them (stdout stays a file to redirect) and both files are written,
// said on stderr — for a generated schedule and for one read from a file.
TEST_CASE("brigade-simulate: --print-schedule with --svg and --trace writes all three") {
  const std::filesystem::path dir = temp_dir("simulate-print-draw");
  const std::string lists = (dir / "alone.schedule").string();
  // brigade-simulate with its stdout to `file`: its output is its stderr alone.
  const auto printing = [](const std::string& flags, const std::string& file) {
    return simulate(flags + " > " + file);
  };
  const std::string make = "--schedule zb-h1 --stages 2 --microbatches 4 --print-schedule";
  REQUIRE(printing(make, lists).status == 0);
  const auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string alone = read(lists);
  REQUIRE(alone.find("zb-h1") != std::string::npos);
  for (const std::string& source : {make, "--print-schedule --schedule-file " + lists}) {
    CAPTURE(source);
    const std::filesystem::path svg = dir / "t.svg", trace = dir / "t.json",
                                printed = dir / "printed.schedule";
    std::filesystem::remove(svg), std::filesystem::remove(trace);
    const Run run = printing(source + " --svg " + svg.string() + " --trace " + trace.string(),
                             printed.string());
    CAPTURE(run.output);  // stderr alone
    CHECK(run.status == 0);
    CHECK(read(printed) == alone);
    CHECK(read(svg).find("<svg") != std::string::npos);
    CHECK(read(trace).find("\"traceEvents\"") != std::string::npos);
    CHECK(run.output.find("wrote " + svg.string()) != std::string::npos);
    CHECK(run.output.find("wrote Chrome trace " + trace.string()) != std::string::npos);
  }
}

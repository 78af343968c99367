// brigade-simulate's own values (tools/brigade-simulate.cpp), refused before anything is
// simulated, exit 2, one line each: costs and device weights that are not finite numbers in
// range (NaN and infinity once crashed the lower bound's sort or never ended its loop), a
// schedule list with an empty or unknown name, counts a generator cannot take, and sizes past
// what it simulates in seconds (each of the last three refused after the names before it had
// run) (p = m = 65536,
// both in the flags' ranges, took gigabytes). Under all, a schedule over --max-live is a row
// of the table that says why, and the others run.
#include <doctest/doctest.h>

#include <string>

#include "tests/tools/train/run_binary.h"
#include "tools/command_line.h"

using namespace brigade::train::test;

namespace {
// brigade-simulate with `flags`, within a minute (a hang is a failure, not a stuck test).
Run simulate(const std::string& flags) {
  return run_command("timeout 60 " + tool_binary("BRIGADE_SIMULATE") + " --no-grid " + flags);
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

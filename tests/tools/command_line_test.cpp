// One command-line convention for every program in tools/ (tools/command_line.h): a bad
// command line exits 2 with CLI11's message, and --help shows every option's default. Checked
// on the helper itself, then on each built program (their paths come from meson, as in
// tests/tools/train/run_binary.h), and the list of programs against the executables that
// tools/meson.build builds, so that a new tool cannot miss the convention unnoticed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/train/run_binary.h"
#include "tools/command_line.h"

using namespace brigade::train::test;
namespace cli = brigade::cli;
namespace fs = std::filesystem;

namespace {

struct Tool {
  std::string name;       // the executable
  std::string variable;   // where meson puts its path
  std::string required;   // what a command line needs (CLI11 reports a missing one first)
  std::string malformed;  // an option given a value that does not convert, or none
};

const Tool kTools[] = {
    {"brigade-train", "BRIGADE_TRAIN", "", "--batch many"},
    {"brigade-bench", "BRIGADE_BENCH", "", "--reps many"},
    {"brigade-bench-pipeline", "BRIGADE_BENCH_PIPELINE", "", "--batch many"},
    {"brigade-simulate", "BRIGADE_SIMULATE", "", "--stages many"},
    {"brigade-plot", "BRIGADE_PLOT", "m.jsonl -o out.svg", "--title"},
    {"bench_emu", "BRIGADE_BENCH_EMU", "", "--reps many"},
};

// The names in executable('NAME', ...) of tools/meson.build and tools/*/meson.build.
std::set<std::string> executables_built_in_tools() {
  const fs::path tools = fs::path(BRIGADE_MODELS_DIR).parent_path();
  std::vector<fs::path> files = {tools / "meson.build"};
  for (const auto& entry : fs::directory_iterator(tools))
    if (entry.is_directory() && fs::exists(entry.path() / "meson.build"))
      files.push_back(entry.path() / "meson.build");
  std::set<std::string> names;
  const std::string call = "executable('";
  for (const fs::path& file : files) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
      const size_t begin = at + call.size();
      names.insert(text.substr(begin, text.find('\'', begin) - begin));
    }
  }
  return names;
}

// The lines of --help that describe an option taking a value: "  --batch INT=128   ...".
// Their first column, up to the description (two spaces), e.g. "--batch INT=128".
std::vector<std::string> value_options_in_help(const std::string& help) {
  std::vector<std::string> heads;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("  -")) continue;
    const std::string head = line.substr(2, line.find("  ", 2) - 2);
    const size_t space = head.find(' ');
    // A type after the name (TEXT, INT, FLOAT, UINT): the option takes a value.
    if (space != std::string::npos && space + 1 < head.size() && std::isupper(head[space + 1]))
      heads.push_back(head);
  }
  return heads;
}

}  // namespace

TEST_CASE("command line: parse() says help, throws CLI11's message for a bad line, else runs") {
  const auto parse = [](std::vector<const char*> argv) {
    CLI::App app{"test"};
    int count = 3;
    app.add_option("--count", count, "a count");
    argv.insert(argv.begin(), "tool");
    return cli::parse(app, static_cast<int>(argv.size()), argv.data());
  };
  CHECK(parse({"--count", "4"}));
  CHECK_FALSE(parse({"--help"}));
  CHECK_THROWS_WITH_AS(parse({"--cuont", "4"}),
                       "The following arguments were not expected: 4 --cuont (see --help)",
                       cli::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--count", "four"}),
                       "Could not convert: --count = four (see --help)", cli::UsageError);
}

TEST_CASE("command line: every tool is checked here") {
  std::set<std::string> checked;
  for (const Tool& tool : kTools) checked.insert(tool.name);
  CHECK(executables_built_in_tools() == checked);
}

TEST_CASE("command line: an unknown or malformed flag exits 2 with CLI11's message, in every tool") {
  for (const Tool& tool : kTools) {
    CAPTURE(tool.name);
    const std::string binary = tool_binary(tool.variable);
    const Run unknown = run_command(binary + " " + tool.required + " --no-such-flag 1");
    CAPTURE(unknown.output);
    CHECK(unknown.status == cli::kUsageStatus);
    CHECK(unknown.output.find(tool.name + ": ") == 0);
    CHECK(unknown.output.find("--no-such-flag") != std::string::npos);
    CHECK(unknown.output.find("(see --help)") != std::string::npos);

    const Run malformed = run_command(binary + " " + tool.required + " " + tool.malformed);
    CAPTURE(malformed.output);
    CHECK(malformed.status == cli::kUsageStatus);
    CHECK(malformed.output.find("(see --help)") != std::string::npos);

    const Run help = run_command(binary + " --help");
    CHECK(help.status == 0);
    CHECK(help.output.find("Options:") != std::string::npos);
  }
  // A value the program parses itself, after CLI11, is refused alike.
  const Run cost = run_command(tool_binary("BRIGADE_SIMULATE") + " --cost f=x");
  CHECK(cost.status == cli::kUsageStatus);
  CHECK(cost.output == "brigade-simulate: --cost: 'f=x' has no number after '='\n");
}

// An output in a directory that does not exist is refused before the work it would record:
// brigade-bench measured for minutes, brigade-simulate simulated every schedule, and only then
// failed to write (exit 1).
TEST_CASE("command line: an output no directory can take is refused before any work, exit 2") {
  const fs::path dir = temp_dir("outputs-nowhere");
  const std::string metrics = write_file(
      dir / "m.jsonl", "{\"kind\":\"step\",\"step\":1,\"loss\":1}\n");
  const std::string nowhere = (dir / "no" / "out").string();
  const struct {
    const char* variable;
    std::string args, flag, work;  // `work`: what the run prints once it has started
  } runs[] = {
      {"BRIGADE_BENCH", " --model tiny_cnn --level gemm --quick --json " + nowhere + ".json",
       "--json", "GFLOP"},
      {"BRIGADE_SIMULATE", " --schedule all --no-grid --svg " + nowhere + ".svg", "--svg", "=="},
      {"BRIGADE_SIMULATE", " --schedule 1f1b --trace " + nowhere + ".json", "--trace", "=="},
      {"BRIGADE_PLOT", " " + metrics + " -o " + nowhere + ".svg", "-o", "wrote"},
      {"BRIGADE_BENCH_PIPELINE", " --model tiny_cnn --train 1 --trace " + nowhere, "--trace",
       "step"},
  };
  for (const auto& r : runs) {
    CAPTURE(r.args);
    const Run run = run_command(tool_binary(r.variable) + r.args);
    CAPTURE(run.output);
    CHECK(run.status == cli::kUsageStatus);
    CHECK(run.output.find(r.flag + " '" + nowhere) != std::string::npos);
    CHECK(run.output.find("' does not exist") != std::string::npos);
    CHECK(run.output.find(r.work) == std::string::npos);
  }
}

TEST_CASE("command line: --help shows every option's default, in every tool") {
  for (const Tool& tool : kTools) {
    CAPTURE(tool.name);
    const Run help = run_command(tool_binary(tool.variable) + " --help");
    REQUIRE(help.status == 0);
    const std::vector<std::string> options = value_options_in_help(help.output);
    CHECK(options.size() >= 2);
    for (const std::string& head : options) {
      CAPTURE(head);
      if (head.find("REQUIRED") != std::string::npos) continue;  // no default to have
      CHECK(head.find('=') != std::string::npos);
      CHECK(head.find("=[]") == std::string::npos);  // an empty list says nothing
    }
  }
}

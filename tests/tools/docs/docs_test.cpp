// The docs test themselves: every ```sh command of README.md and docs/*.md runs as written
// (briefly: capped_tool.sh), and the checker that says so fails on a page broken on purpose.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "docs_checker.h"

namespace fs = std::filesystem;
using namespace brigade::docs_test;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE_MESSAGE(value != nullptr, name << " is not set: run through meson test");
  return value;
}

CheckSetup setup(const std::string& name) {
  CheckSetup s;
  s.source_root = environment("BRIGADE_SOURCE_ROOT");
  s.capped_tool = s.source_root / "tests" / "tools" / "docs" / "capped_tool.sh";
  for (const auto& [tool, variable] : {std::pair{"brigade-train", "BRIGADE_TRAIN"},
                                       {"brigade-plot", "BRIGADE_PLOT"},
                                       {"brigade-bench", "BRIGADE_BENCH"},
                                       {"brigade-bench-pipeline", "BRIGADE_BENCH_PIPELINE"},
                                       {"brigade-simulate", "BRIGADE_SIMULATE"}})
    s.tools[tool] = environment(variable);
  s.have_mpi = environment("BRIGADE_HAVE_MPI") == "true";
  s.scratch =
      fs::temp_directory_path() / ("brigade-docs-test-" + std::to_string(::getpid())) / name;
  // As root, mpirun commands run as nobody too, where setpriv can switch to it.
  if (::geteuid() == 0 && fs::exists("/usr/bin/setpriv"))
    s.as_not_root = "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp";
  return s;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

}  // namespace

TEST_CASE("a fenced block's commands: lines, continuations, files and untagged fences") {
  const MarkdownCommands read = read_markdown_commands(
      "page.md",
      "text\n```sh\na --x \\\n  --y   # z\n\n# a comment\nb\n```\n```model m.model\ninput 1\n```\n"
      "```text\nnot a command\n```\n```\nuntagged\n```\n");
  REQUIRE(read.commands.size() == 2);
  CHECK(read.commands[0].line == 3);
  CHECK(read.commands[0].text == "a --x \\\n  --y   # z");
  CHECK(read.commands[1].line == 7);
  CHECK(read.commands[1].text == "b");
  REQUIRE(read.files.size() == 1);
  CHECK(read.files[0].name == "m.model");
  CHECK(read.files[0].text == "input 1\n");
  REQUIRE(read.errors.size() == 1);
  CHECK(read.errors[0].find("page.md:15: a fenced block without a language") == 0);
}

TEST_CASE("the checker fails on a page broken on purpose, naming page, line and command") {
  const CheckSetup s = setup("fixture");
  const fs::path fixtures = s.source_root / "tests" / "tools" / "docs" / "fixtures";
  const std::vector<NotRun> stale = {{"broken.md", "build/tools/brigade-train --gone", "why"}};
  const CheckResult result = check_pages(s, fixtures, {"broken.md"}, stale);
  INFO("failures:\n" << joined(result.failures));
  CHECK(result.ran.size() == 3);
  REQUIRE(result.failures.size() == 3);
  // The untagged block (read before any command runs); the broken command, with what
  // brigade-train said, while the commands around it ran; the list entry that names a
  // command the page does not hold.
  CHECK(result.failures[0].find("broken.md:21: a fenced block without a language") == 0);
  CHECK(result.failures[1].find("broken.md:16: build/tools/brigade-train --model two.model "
                                "--schedule no-such-schedule\n  exited 2") == 0);
  CHECK(result.failures[1].find("--schedule: no-such-schedule not in") != std::string::npos);
  CHECK(fs::exists(s.scratch / "broken.md" / "run.svg"));
  CHECK(result.failures[2].find("broken.md: the list of commands not run (not_run.h) names "
                                "`build/tools/brigade-train --gone`") == 0);
  fs::remove_all(s.scratch.parent_path());
}

TEST_CASE("every command of README.md and docs/*.md runs as written") {
  const CheckSetup s = setup("docs");
  std::vector<std::string> pages = {"README.md"};
  for (const auto& entry : fs::directory_iterator(s.source_root / "docs"))
    if (entry.path().extension() == ".md") pages.push_back("docs/" + entry.path().filename().string());
  std::sort(pages.begin() + 1, pages.end());
  const CheckResult result = check_pages(s, s.source_root, pages, not_run());
  for (const std::string& line : result.ran) MESSAGE("ran " << line);
  for (const std::string& line : result.not_run) MESSAGE("not run: " << line);
  for (const std::string& failure : result.failures) FAIL_CHECK(failure);
  // The docs hold commands; a checker that found none would pass vacuously.
  CHECK(has(result.ran, "README.md:"));
  CHECK(has(result.ran, "docs/training.md:"));
  if (s.have_mpi) CHECK(has(result.ran, "mpirun"));
  if (s.have_mpi && !s.as_not_root.empty()) CHECK(has(result.ran, " as nobody"));
  fs::remove_all(s.scratch.parent_path());
}

// tests/support/scratch_dir.h: the directory every test of brigade-train writes its files in is
// gone when the test process ends (a run of the suite used to leave one directory per test in
// the system's temporary directory, thousands a day), and a forked child does not take it away.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;
using brigade::testing::ProcessScratch;

TEST_CASE("scratch directories: fresh and empty on each use, all removed with their process") {
  std::optional<ProcessScratch> scratch(std::in_place, "brigade-scratch-dir-test");
  const fs::path root = scratch->root();
  const fs::path a = scratch->fresh("a");
  CHECK(a.parent_path() == root);
  std::ofstream(a / "file") << "written by a test";
  CHECK(fs::exists(a / "file"));
  CHECK(fs::is_empty(scratch->fresh("a")));  // the same name again: emptied
  std::ofstream(scratch->fresh("b") / "nested") << "x";

  // A forked child that exits through its exit handlers leaves its parent's directory alone.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    scratch.reset();
    ::_exit(fs::exists(root) ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::exists(root / "b" / "nested"));

  scratch.reset();  // what the process's exit does to scratch_dir's directory
  CHECK(!fs::exists(root));
}

// scratch_dir(name): a fresh, empty directory for one test's files, under one directory per test
// process (<system temp>/brigade-test-<pid>) that is removed when the process exits, so a test
// run leaves nothing behind in the temporary directory however many times it runs. A process
// that dies (a crash, a Deadline's abort) leaves its directory, with the files that show what
// happened, for whoever reads the failure.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace brigade::testing {

class ProcessScratch {
 public:
  explicit ProcessScratch(const std::string& prefix = "brigade-test")
      : owner_(::getpid()),
        root_(std::filesystem::temp_directory_path() /
              (prefix + "-" + std::to_string(owner_))) {}
  ProcessScratch(const ProcessScratch&) = delete;
  ProcessScratch& operator=(const ProcessScratch&) = delete;
  // Only the process that made the directory removes it: a child forked by a test (which then
  // runs exit handlers without exec) must not take its parent's files away.
  ~ProcessScratch() {
    if (::getpid() != owner_) return;
    std::error_code ignored;  // nothing to report to at exit; a leftover is only untidy
    std::filesystem::remove_all(root_, ignored);
  }

  const std::filesystem::path& root() const { return root_; }

  // root/name, emptied if an earlier test of this process used the same name.
  std::filesystem::path fresh(const std::string& name) const {
    const std::filesystem::path dir = root_ / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
  }

 private:
  pid_t owner_;
  std::filesystem::path root_;
};

// One ProcessScratch per process (an inline function's static: one over every file that
// includes this header), made at its first use and removed when the process exits.
inline std::filesystem::path scratch_dir(const std::string& name) {
  static const ProcessScratch scratch;
  return scratch.fresh(name);
}

}  // namespace brigade::testing

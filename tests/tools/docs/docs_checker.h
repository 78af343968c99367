// Runs the ```sh commands of Markdown pages as a user would, and says which did not run as
// written. Each page gets a fresh directory standing for the repository's root: `tools/` is the
// source tree's, `build/tools/NAME` is the built program behind capped_tool.sh (at most a few
// steps of brigade-train; README.md of this folder), and every file a page shows
// (```model my.model) is written there first. A page's commands run in order in that
// directory, each through bash under a deadline, so a later command may read what an earlier
// one wrote, as a reader following the page would.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "markdown_commands.h"
#include "not_run.h"

namespace brigade::docs_test {

struct CheckSetup {
  std::filesystem::path source_root;          // holds tools/ (models, scripts)
  std::filesystem::path capped_tool;          // tests/tools/docs/capped_tool.sh
  std::map<std::string, std::string> tools;   // "brigade-train" -> the built program
  bool have_mpi = false;                      // --distributed is built
  int deadline_s = 120;                       // per command
  // As root: each mpirun command runs once more as `nobody` (Open MPI treats root apart: a
  // command must work for both), through this prefix, e.g. "setpriv --reuid=65534 ...".
  std::string as_not_root;
  std::filesystem::path scratch;              // where the pages' directories go
};

struct CheckResult {
  std::vector<std::string> failures;  // "PAGE:LINE: COMMAND\n  why"
  std::vector<std::string> ran;       // "PAGE:LINE: COMMAND"
  std::vector<std::string> not_run;   // "PAGE:LINE: COMMAND (reason)"
};

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The last `count` lines of a program's output, indented, for a failure message.
inline std::string output_tail(const std::string& output, size_t count) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < output.size();) {
    size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    lines.push_back(output.substr(begin, end - begin));
    begin = end + 1;
  }
  std::string tail;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i)
    tail += "\n    | " + lines[i];
  return tail;
}

// The page's directory: build/tools/NAME wrappers, tools/ from the source tree, the page's files.
inline void prepare_directory(const CheckSetup& setup, const std::filesystem::path& dir,
                              const std::vector<DocFile>& files) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "build" / "tools");
  for (const auto& [name, program] : setup.tools) {
    const auto wrapper = dir / "build" / "tools" / name;
    std::ofstream(wrapper) << "#!/bin/sh\nexec '" << setup.capped_tool.string() << "' '" << program
                           << "' \"$@\"\n";
    using std::filesystem::perms;  // rwxr-xr-x: another user runs it too
    std::filesystem::permissions(wrapper, perms::owner_all | perms::group_read |
                                              perms::group_exec | perms::others_read |
                                              perms::others_exec);
  }
  std::filesystem::create_directory_symlink(setup.source_root / "tools", dir / "tools");
  for (const DocFile& file : files) std::ofstream(dir / file.name) << file.text;
}

// Runs one command in `dir` through bash; returns (exit status, stdout and stderr).
// `as` prefixes bash (another user), or is "".
inline std::pair<int, std::string> run_in(const std::filesystem::path& dir,
                                          const std::string& command, int deadline_s,
                                          const std::string& as = "") {
  std::ofstream(dir / ".docs-command.sh") << command << "\n";
  const std::string line = "cd '" + dir.string() + "' && timeout --kill-after=10 " +
                           std::to_string(deadline_s) + " " + as + " bash .docs-command.sh 2>&1 "
                           "</dev/null";
  std::string output;
  std::FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

// Checks `pages` (paths relative to `root`) against the reviewed list `skip`.
inline CheckResult check_pages(const CheckSetup& setup, const std::filesystem::path& root,
                               const std::vector<std::string>& pages,
                               const std::vector<NotRun>& skip) {
  CheckResult result;
  std::vector<bool> used(skip.size(), false);
  for (const std::string& page : pages) {
    std::string page_reason;  // a whole page not run
    for (size_t i = 0; i < skip.size(); ++i)
      if (skip[i].page == page && skip[i].command.empty()) {
        used[i] = true;
        page_reason = skip[i].reason;
      }
    if (!page_reason.empty()) {
      result.not_run.push_back(page + ": every command (" + page_reason + ")");
      continue;
    }
    const MarkdownCommands read = read_markdown_commands(page, read_text((root / page).string()));
    result.failures.insert(result.failures.end(), read.errors.begin(), read.errors.end());
    std::string dir_name = page;
    for (char& c : dir_name) if (c == '/') c = '_';
    const auto dir = setup.scratch / dir_name;
    prepare_directory(setup, dir, read.files);
    for (const DocCommand& command : read.commands) {
      const std::string where = page + ":" + std::to_string(command.line) + ": " + command.text;
      std::string reason;
      for (size_t i = 0; i < skip.size(); ++i) {
        if (skip[i].page != page || skip[i].command != trimmed(first_line(command.text))) continue;
        used[i] = true;
        reason = skip[i].reason;
      }
      if (reason.empty() && !setup.have_mpi && command.text.rfind("mpirun", 0) == 0)
        reason = "this build has no MPI (--distributed is built where Meson finds it)";
      if (!reason.empty()) {
        result.not_run.push_back(where + " (" + reason + ")");
        continue;
      }
      std::vector<std::pair<std::string, std::string>> users = {{"", ""}};  // (who, prefix)
      if (!setup.as_not_root.empty() && command.text.rfind("mpirun", 0) == 0)
        users.emplace_back(" as nobody", setup.as_not_root);
      for (const auto& [who, as] : users) {
        const auto [status, output] = run_in(dir, command.text, setup.deadline_s, as);
        result.ran.push_back(where + who);
        if (status == 124 || status == 137)
          result.failures.push_back(where + "\n  ran" + who + " past its " +
                                    std::to_string(setup.deadline_s) + " s deadline" +
                                    output_tail(output, 15));
        else if (status != 0)
          result.failures.push_back(where + "\n  exited " + std::to_string(status) + who +
                                    output_tail(output, 15));
      }
    }
  }
  for (size_t i = 0; i < skip.size(); ++i)
    if (!used[i])
      result.failures.push_back(skip[i].page + ": the list of commands not run (not_run.h) names `" +
                                skip[i].command + "`, which the page does not hold");
  return result;
}

}  // namespace brigade::docs_test

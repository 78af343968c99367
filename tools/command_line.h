// The command-line convention every program in tools/ follows (tools/README.md, "Command
// lines"), in one place so that the programs cannot drift apart:
//   - --help prints every option with its default on stdout, and the program exits 0;
//   - a bad command line (an unknown flag, a missing or malformed value, a value out of
//     range) prints CLI11's message on stderr, "program: message (see --help)", and the
//     program exits 2 — the status brigade-train gives every input it refuses before it
//     starts. CLI11_PARSE would exit with CLI11's internal codes instead (109 for an unknown
//     flag, 105 for a value that does not convert), which a script cannot tell apart from a
//     crash of the program.
#pragma once

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace brigade::cli {

// The exit status of a command line or an input refused before any work.
inline constexpr int kUsageStatus = 2;

// A mistake on the command line, or a combination of options that cannot run. what() is the
// whole message, without the program's name.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Makes --help show every option's default: CLI11 shows one only when each option asks for
// it. Call it before adding options. An option whose default is not a value one could type
// (an empty list meaning "decided at run time", an output not written) says it in words with
// ->default_str("...").
inline void show_defaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

// The default shown for an option that is off unless given: a file not written or not read.
// In parentheses, so that it does not read as a value to type.
inline constexpr const char* kNotGiven = "(none)";

// Parses argv into `app`. Returns false when the program should stop at once with status 0
// (--help was printed on stdout); throws UsageError for a bad command line.
inline bool parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& help) {
    app.exit(help);  // prints the help on stdout
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see --help)");
  }
  return true;
}

// parse() for a main() that has nothing else to report before its work: nullopt to carry on,
// or the status to exit with at once (0 after --help; 2 after "program: message" on stderr).
inline std::optional<int> parse_or_exit_status(CLI::App& app, int argc, const char* const* argv,
                                               const char* program) {
  try {
    if (!parse(app, argc, argv)) return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return kUsageStatus;
  }
  return std::nullopt;
}

// Refuses an output file of `flag` that cannot be written, before any work is done for it: a
// name that is a directory, or one whose directory does not exist or does not allow creating
// a file (the file is written to a temporary name beside it, then renamed:
// engine/output_file.h). brigade-train's own check says more (tools/train/preflight.h).
inline void check_output_file(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw UsageError(flag + ": an empty file name");
  if (path.ends_with('/') || fs::is_directory(path, ec))
    throw UsageError(flag + " '" + path + "' is a directory: give a file name in it");
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
  if (!fs::is_directory(dir, ec))
    throw UsageError(flag + " '" + path + "': the directory '" + dir.string() +
                     "' does not exist (checked before any work, rather than fail after it)");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError(flag + " '" + path + "': the directory '" + dir.string() +
                     "' does not allow creating a file");
}

}  // namespace brigade::cli

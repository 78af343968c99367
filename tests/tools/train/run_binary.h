// Running the built brigade-train (and the other tools) from a test: its path comes in the
// environment (BRIGADE_TRAIN, BRIGADE_BENCH, ..., set by tests/tools/train/meson.build), its
// output and exit status come back.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace brigade::train::test {

struct Run {
  int status = -1;     // the exit status
  std::string output;  // stdout and stderr together
};

// The path of a built tool, from the environment variable meson sets (e.g. BRIGADE_BENCH).
inline std::string tool_binary(const std::string& variable) {
  const char* path = std::getenv(variable.c_str());
  REQUIRE_MESSAGE(path != nullptr, variable << " is not set: run through meson test");
  return path;
}

inline std::string train_binary() { return tool_binary("BRIGADE_TRAIN"); }

// Whether this build has --distributed (MPI), for the tests that run mpirun themselves.
inline bool have_mpi() {
  const char* v = std::getenv("BRIGADE_HAVE_MPI");
  return v != nullptr && std::string(v) == "true";
}

// Runs a shell command line, stdin empty, stdout not a terminal.
inline Run run_command(const std::string& line) {
  const std::string command = line + " 2>&1 </dev/null";
  Run r;
  std::FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The command a message of `output` prints, indented, on the line right after the words
// `marker` ("" when that line is not one: a later indented line is another message's).
inline std::string command_after(const std::string& output, const std::string& marker) {
  const size_t at = output.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = output.find('\n', at);
  if (start == std::string::npos || output.compare(start, 3, "\n  ") != 0) return "";
  return output.substr(start + 3, output.find('\n', start + 3) - (start + 3));
}

// `word` for a shell, in single quotes (a quote inside written '\'').
inline std::string shell_quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command line that runs brigade-train with `args`, each quoted for the shell: to run as it
// is, or with an environment before it or more flags after it.
inline std::string train_command(const std::vector<std::string>& args) {
  std::string command = train_binary();
  for (const std::string& a : args) command.append(" ").append(shell_quoted(a));
  return command;
}

// Runs brigade-train with `args`.
inline Run run_train(const std::vector<std::string>& args) {
  return run_command(train_command(args));
}

// Runs brigade-train with `args`, a run that must succeed (its output shown if it does not).
inline Run run_train_ok(const std::vector<std::string>& args) {
  const Run r = run_train(args);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  return r;
}

// A fresh, empty directory for a test's files, removed with the others when the test process
// exits (tests/support/scratch_dir.h).
inline std::filesystem::path temp_dir(const std::string& name) {
  return testing::scratch_dir(name);
}

inline std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// A file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A Fashion-MNIST directory (the four IDX files, uncompressed, for --data-dir) of `train`
// training and `test` test images: image i of class i mod 10, a bright row at a place of its
// class.
inline std::string fashion_dir(const std::filesystem::path& dir, uint32_t train, uint32_t test) {
  const auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)};
  };
  std::filesystem::create_directories(dir);
  for (const auto& [split, count] : {std::pair{"train", train}, {"t10k", test}}) {
    std::string pixels(size_t{count} * 28 * 28, '\0'), labels(count, '\0');
    for (uint32_t i = 0; i < count; ++i) {
      labels[i] = static_cast<char>(i % 10);
      pixels.replace(size_t{i} * 28 * 28 + (2 + 2 * (i % 10)) * 28, 28, 28,
                     static_cast<char>(200));
    }
    write_file(dir / (std::string(split) + "-images-idx3-ubyte"),
               be32(0x803) + be32(count) + be32(28) + be32(28) + pixels);
    write_file(dir / (std::string(split) + "-labels-idx1-ubyte"),
               be32(0x801) + be32(count) + labels);
  }
  return dir.string();
}

// A small model for quick runs on synthetic data, in two device blocks: 40 + 1,450 = 1,490 parameters.
inline const char* kSmallModel =
    "input 28x28x1\n"
    "device 0\n"
    "conv2d filters=4 kernel=3x3 activation=relu\n"
    "maxpool2d pool=4x4\n"
    "device 1\n"
    "dropout rate=0.25\n"
    "flatten\n"
    "dense units=10 activation=softmax\n";

}  // namespace brigade::train::test

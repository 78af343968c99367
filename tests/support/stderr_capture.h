// StderrCapture: what the process writes to standard error while one is alive.
//
//   StderrCapture captured;          // file descriptor 2 now goes to a temporary file
//   ...code that reports on stderr...
//   const std::string text = captured.text();   // stderr is back; what was written meanwhile
//
// The descriptor itself is redirected, so what any thread, printf or a library writes there is
// caught, not only std::cerr. Restored when text() is called or the capture ends.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace brigade::testing {

class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()), saved_(::dup(2)) {
    REQUIRE(file_ != nullptr);
    REQUIRE(saved_ >= 0);
    std::fflush(stderr);
    REQUIRE(::dup2(::fileno(file_), 2) == 2);
  }
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Puts stderr back and returns what was written to it meanwhile.
  std::string text() {
    restore();
    std::rewind(file_);
    std::string out;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file_)) > 0;) out.append(buffer, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_;
};

}  // namespace brigade::testing

// What every fuzz target checks besides "no crash": a helper that stops the run with a
// message when an invariant of an accepted input fails, and the rule every error message of
// a parser keeps when the input is hostile.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace brigade::fuzz {

// Aborts (so libFuzzer keeps the input as a crash) when `ok` is false.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

// An error message a hostile file provoked must be short and free of control bytes: a file
// must not be able to put terminal escapes or megabytes into what a user reads. Newlines are
// allowed when `multi_line` (messages that list several mismatches).
inline void check_message(std::string_view message, size_t max_bytes, bool multi_line = false) {
  if (message.size() > max_bytes) {
    std::fprintf(stderr, "error message of %zu bytes (limit %zu): %.200s...\n", message.size(),
                 max_bytes, std::string(message).c_str());
    std::abort();
  }
  for (char c : message) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && !(multi_line && c == '\n')) || u == 0x7f) {
      std::fprintf(stderr, "control byte 0x%02x in error message: %s\n", u,
                   std::string(message).c_str());
      std::abort();
    }
  }
}

}  // namespace brigade::fuzz

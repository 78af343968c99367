// What every fuzz target checks besides "no crash": a helper that stops the run with a
// message when an invariant of an accepted input fails, and the rule every error message of
// a parser keeps when the input is hostile.
#pragma once

#include <cstdint>
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

// Whether `text` is UTF-8: every byte >= 0x80 part of a well-formed sequence (no overlong
// form, no surrogate, nothing past U+10FFFF).
inline bool is_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t code = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      code = (code << 6) | (b & 0x3f);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < least[n] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return false;
    i += n;
  }
  return true;
}

// An error message a hostile file provoked must be short, UTF-8 and free of control bytes: a
// file must not be able to put terminal escapes, bytes a terminal cannot show, or megabytes
// into what a user reads. Newlines are allowed when `multi_line` (messages that list several
// mismatches).
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
  if (!is_utf8(message)) {
    std::fprintf(stderr, "bytes that are no UTF-8 in error message: %s\n",
                 std::string(message).c_str());
    std::abort();
  }
}

}  // namespace brigade::fuzz

#include "engine/error.h"

#include <cstdio>

namespace brigade {

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

namespace {

// The length of the UTF-8 character at the start of `text` (2 to 4 bytes), 0 when its first
// byte starts none: a stray continuation byte, a sequence cut short, an overlong form, a
// UTF-16 surrogate, past U+10FFFF, or a C1 control (U+0080 to U+009F: a terminal may act on
// one, as on ESC).
size_t utf8_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char c = byte(0);
  const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || text.size() < n) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  // The second byte's range where the first allows less than any continuation byte.
  const unsigned char c1 = byte(1);
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
      (c == 0xf4 && c1 > 0x8f) || (c == 0xc2 && c1 <= 0x9f))
    return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (const size_t n = c >= 0x80 ? utf8_length(text.substr(i)) : 0; n > 0) {
      if (i + n > max_bytes) break;  // a character is never cut: it goes with the rest
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
    ++i;
  }
  return out + (i < text.size() ? "..." : "");
}

std::string format_bytes(uint64_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

namespace detail {

namespace {
std::string library_error(const char* library, const char* call, const char* file, int line,
                          long code, const char* what) {
  std::ostringstream os;
  os << library << " error " << code << " (" << (what ? what : "unknown error") << ") in "
     << call << " at " << file << ":" << line;
  return os.str();
}
}  // namespace

void throw_library_error(const char* library, const char* call, const char* file, int line,
                         long code, const char* what) {
  throw Error(library_error(library, call, file, line, code, what));
}

void report_library_error(const char* library, const char* call, const char* file, int line,
                          long code, const char* what) noexcept {
  try {
    std::fprintf(stderr, "brigade: %s\n",
                 library_error(library, call, file, line, code, what).c_str());
  } catch (...) {  // no memory for the text: the bare facts, which need none
    std::fprintf(stderr, "brigade: %s error %ld in %s\n", library, code, call);
  }
}

}  // namespace detail
}  // namespace brigade

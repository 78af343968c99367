#include "tools/train/number_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "tools/train/options.h"

namespace brigade::train {

namespace {

// A real flag's text as the double CLI11 will store, or why it is refused.
struct Number {
  double value = 0;
  std::string refusal;  // empty: value is the flag's
};

Number number_of(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  const bool out_of_range = errno == ERANGE;
  if (end == begin) return {0, ""};  // not a number: CLI11's own conversion error says so
  if (end != begin + text.size()) return {std::nan(""), ""};  // "1x": refused by the range
  if (out_of_range && v == 0) return {v, text + " is out of range: a double rounds it to 0"};
  if (out_of_range && std::isinf(v))
    return {v, text + " is out of range: more than a double holds (1.8e+308)"};
  if (!std::isfinite(v)) return {v, "must be a finite number, got " + text};
  return {v, ""};
}

// A check of a real flag: `ok` on its value, else "must be `rule`, got TEXT".
template <typename Ok>
CLI::Validator real_check(Ok ok, const std::string& rule, const std::string& help) {
  return CLI::Validator(
      [ok, rule](std::string& text) -> std::string {
        const Number n = number_of(text);
        if (!n.refusal.empty()) return n.refusal;
        if (!ok(n.value)) return "must be " + rule + ", got " + text;
        return "";
      },
      help);
}

}  // namespace

CLI::Validator at_least(double lo) {
  return real_check([lo](double v) { return v >= lo; }, "at least " + format_number(lo),
                    ">= " + format_number(lo));
}

CLI::Validator above_zero() {
  return real_check([](double v) { return v > 0; }, "greater than 0", "> 0");
}

CLI::Validator in_zero_one() {
  return real_check([](double v) { return v >= 0 && v < 1; }, "in [0, 1)", "in [0, 1)");
}

template <typename T>
CLI::Validator within_type() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        // strtoull, like strtoll, skips white space and takes a sign.
        const size_t first = text.find_first_not_of(" \t\n\v\f\r");
        const bool negative = first != std::string::npos && text[first] == '-';
        if constexpr (std::is_unsigned_v<T>) {
          if (negative) return "must not be negative, got " + text;
          std::strtoull(begin, &end, 0);
        } else {
          std::strtoll(begin, &end, 0);
        }
        if (end != begin + text.size()) return "";  // not an integer: CLI11 says so
        if (errno != ERANGE) return "";
        if (negative)
          return text + " is out of range: at least " +
                 std::to_string(std::numeric_limits<T>::min());
        return text + " is out of range: at most " + std::to_string(std::numeric_limits<T>::max());
      },
      "");
}

template CLI::Validator within_type<int64_t>();
template CLI::Validator within_type<uint64_t>();

}  // namespace brigade::train

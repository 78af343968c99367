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
  if (end == begin) return {0, "must be a number, got '" + text + "'"};
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
CLI::Validator whole_number(T most, const std::string& why) {
  return CLI::Validator(
      [most, why](std::string& text) -> std::string {
        // Decimal digits after an optional sign: C's other bases ("010" is 8, "0x10" 16) would
        // be a surprise, and "" is no number.
        const size_t digits = text.starts_with('+') || text.starts_with('-') ? 1 : 0;
        const bool decimal = text.size() > digits &&
                             text.find_first_not_of("0123456789", digits) == std::string::npos &&
                             (text[digits] != '0' || text.size() == digits + 1);
        if (!decimal) return "must be a whole number in decimal, got '" + text + "'";
        const bool negative = text[0] == '-';
        if (std::is_unsigned_v<T> && negative) return "must not be negative, got " + text;
        // The value CLI11 will store (the same digits in its base 0), read into the widest type
        // of T's signedness: past that, strtoll and strtoull clamp and say so in errno.
        using Wide = std::conditional_t<std::is_unsigned_v<T>, unsigned long long, long long>;
        errno = 0;
        Wide v = 0;
        if constexpr (std::is_unsigned_v<T>)
          v = std::strtoull(text.c_str(), nullptr, 10);
        else
          v = std::strtoll(text.c_str(), nullptr, 10);
        const bool clamped = errno == ERANGE;
        if (negative && (clamped || v < Wide{std::numeric_limits<T>::min()}))
          return text + " is out of range: at least " +
                 std::to_string(std::numeric_limits<T>::min());
        if (clamped || v > Wide{most}) {
          if (why.empty()) return text + " is out of range: at most " + std::to_string(most);
          return "must be at most " + std::to_string(most) + " (" + why + "), got " + text;
        }
        return "";
      },
      // --help shows a bound of the flag's own: "INT:<= 2147483648".
      most == std::numeric_limits<T>::max() ? "" : "<= " + std::to_string(most));
}

template CLI::Validator whole_number<int>(int, const std::string&);
template CLI::Validator whole_number<int64_t>(int64_t, const std::string&);
template CLI::Validator whole_number<uint64_t>(uint64_t, const std::string&);

}  // namespace brigade::train

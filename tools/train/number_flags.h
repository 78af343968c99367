// Number flags: the checks CLI11 runs on a number flag's text before it stores the value, each
// saying its rule in words ("--lr: must be greater than 0, got -1", see options.cpp) where
// CLI11's own NonNegativeNumber and PositiveNumber name their range up to DBL_MAX, 309 digits
// ("Value -1 not in range 0.000000 to 179769313486...").
//
// They also refuse what CLI11 would store without a word:
// - a real number: CLI11 reads it with strtold and narrows it to a double, so "1e400" and
//   "inf" would be an infinite --lr (a run that fails at step 2), "1e-400" an --lr of 0 (one
//   that trains nothing);
// - an integer: CLI11 reads it with strtoll or strtoull in any base, as C does, and keeps what
//   they clamp to, so 2^64 would be --steps 2^63 - 1, strtoull negates "-1" into 2^64 - 1 (a
//   --seed nobody asked for), "010" is octal 8 and "" is 0.
//
// And a number that is none ("x", "1.5" for a count) is refused in these words, once, where
// CLI11's "Could not convert: --batch = 5,x" would list every value of a flag given twice.
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <string>

namespace brigade::train {

CLI::Validator at_least(double lo);  // "must be at least 0, got -3"
CLI::Validator above_zero();         // "must be greater than 0, got 0"
CLI::Validator in_zero_one();        // [0, 1): "must be in [0, 1), got 1"

// An integer flag of type T (int, int64_t or uint64_t): decimal digits, within T's range, or
// at most `most` where the flag's real bound is smaller (then said with `why`):
// "must be a whole number in decimal, got 1.5", "2^64 is out of range: at most
// 9223372036854775807", "must be at most 2147483648 (2^31: ...), got 3000000000",
// "must not be negative, got -1".
template <typename T>
CLI::Validator whole_number(T most = std::numeric_limits<T>::max(), const std::string& why = "");

}  // namespace brigade::train

// error_text<E>(fn): the message of the E that fn throws, "" when it throws nothing. Anything
// else fn throws escapes, so a test that expects brigade::Error fails on, say, a
// std::out_of_range instead of comparing its text.
#pragma once

#include <string>
#include <utility>

#include "engine/error.h"

namespace brigade::testing {

template <class E, class Fn>
std::string error_text(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// The message of the brigade::Error fn throws ("" when it throws none): what most tests compare.
template <class Fn>
std::string error_of(Fn&& fn) {
  return error_text<brigade::Error>(std::forward<Fn>(fn));
}

}  // namespace brigade::testing

// wave(n, f): n smooth values in (-0.9, 0.9), sin(f·(i+1))·0.9: test inputs with no two
// elements alike and no zeros, shared by the op tests of one executable.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace brigade::testing {

inline std::vector<float> wave(int64_t n, float f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(f * float(i + 1)) * 0.9f;
  return v;
}

}  // namespace brigade::testing

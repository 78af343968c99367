// Helpers of the ops_*_test.cpp suites: the hand-written kernels of kernels/cuda/ run through
// the emulator (brigade::emu::...) on a CPU stream and compared with brigade::ref in double.
//
// Tolerances (tests/kernels/cpu/check.h): a float result that sums L terms whose magnitudes
// add up to M is checked within 4·sqrt(L)·eps·M of the double reference, where M comes from
// running the reference on |inputs|. Kernels that do no arithmetic beyond the reference's
// own float operations (ReLU, dropout, pooling, copies) are compared bit for bit with
// brigade::ref<float>.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "tests/kernels/cpu/check.h"

namespace brigade::test {

// A stream of a CPU device with two compute threads, so that blocks of one grid really run
// at the same time (the sanitizers then see any race between blocks).
inline Stream emu_stream() {
  constexpr int kDevice = 7;  // not used by the other emulator suites of this executable
  configure_cpu_device(kDevice, {.threads = 2});
  return Stream::create(Device::cpu(kDevice));
}

// Outputs start as NaN: an element the kernel forgets to write shows up as a mismatch.
inline std::vector<float> nan_vector(int64_t n) {
  return std::vector<float>(static_cast<size_t>(n), NAN);
}

// got == want bit for bit (NaN == NaN); prints the first five differences.
inline bool all_equal(const char* what, const float* got, const float* want, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (bad < 5)
        std::printf("  %s[%lld]: got %.9g, want %.9g\n", what, static_cast<long long>(i),
                    static_cast<double>(got[i]), static_cast<double>(want[i]));
      ++bad;
    }
  }
  if (bad) std::printf("  %s: %lld of %lld values differ\n", what, static_cast<long long>(bad),
                       static_cast<long long>(n));
  return bad == 0;
}

// got == want for integer outputs (argmax); prints the first five differences.
inline bool all_equal(const char* what, const std::vector<int32_t>& got,
                      const std::vector<int32_t>& want) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (bad < 5) std::printf("  %s[%zu]: got %d, want %d\n", what, i, got[i], want[i]);
      ++bad;
    }
  }
  if (bad) std::printf("  %s: %lld of %zu values differ\n", what, static_cast<long long>(bad), got.size());
  return bad == 0;
}

}  // namespace brigade::test

// The bf16 value kernels of kernels/cuda/bf16_values.cu through the emulator, against
// brigade::ref::round_to_bf16 (which rounds on the value, in double, not on the bits) on the
// values where rounding is delicate: ties both ways, denormals, the largest bf16 and the
// overflow to infinity, infinities, signed zeros, NaNs (kept NaN, made quiet, sign and upper
// payload kept), and a wave of ordinary values; sizes not multiples of the 256-thread block.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cuda/launchers.h"
#include "kernels/reference/bf16.h"
#include "tests/kernels/emu/ops_check.h"

using namespace brigade;
using namespace brigade::test;

namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// The delicate values, then `extra` ordinary ones.
std::vector<float> tricky_values(int64_t extra) {
  std::vector<float> v = {
      1.0f + 0x1p-8f,                // a tie: down to the even 1
      1.0f + 3 * 0x1p-8f,            // a tie: up to the even 1 + 2^-6
      -(1.0f + 3 * 0x1p-8f),         // the same tie, negative
      1.0f + 0x1p-8f + 0x1p-20f,     // just above a tie: up
      0.0f, -0.0f,
      from_bits(0x00018000u),        // a denormal on a tie: up to 0x0002
      from_bits(0x807fffffu),        // the largest negative denormal: to -2^-126 (0x8080)
      from_bits(0x00000001u),        // the smallest denormal: to 0
      from_bits(0x7F7F0000u),        // the largest bf16, exact
      from_bits(0x7F7F7FFFu),        // just below the halfway point above it: stays
      from_bits(0x7F7F8000u),        // the halfway point: to infinity (the even neighbour)
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
  };
  for (const double x : random_vector(extra, 77)) v.push_back(static_cast<float>(x));
  return v;
}

// The NaNs: signalling and quiet, both signs, with payload bits above and below the cut.
const uint32_t kNaNs[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u, 0xFF812345u};

}  // namespace

TEST_CASE("bf16 values on a GPU: rounded, narrowed and widened as the reference rounds") {
  const Stream stream = emu_stream();
  for (const int64_t extra : {0, 300, 1031}) {
    const std::vector<float> x = tricky_values(extra);
    const int64_t n = static_cast<int64_t>(x.size());
    INFO("n = " << n);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = ref::round_to_bf16(x[i]);
    CHECK(std::bit_cast<uint32_t>(want[6]) == 0x00020000u);  // the reference agrees with bf16.h
    CHECK(std::bit_cast<uint32_t>(want[7]) == 0x80800000u);
    CHECK(std::isinf(want[11]));

    std::vector<float> rounded = nan_vector(n), widened = nan_vector(n), in_place = x;
    std::vector<cpu::bf16> narrow(x.size(), cpu::bf16{0xFFFF});
    emu::round_to_bf16_values(x.data(), rounded.data(), n, stream);
    emu::round_to_bf16_values(in_place.data(), in_place.data(), n, stream);
    emu::narrow_to_bf16(x.data(), narrow.data(), n, stream);
    emu::widen_from_bf16(narrow.data(), widened.data(), n, stream);
    stream.synchronize();
    CHECK(all_equal("rounded", rounded.data(), want.data(), n));
    CHECK(all_equal("in place", in_place.data(), want.data(), n));
    CHECK(all_equal("narrowed and widened", widened.data(), want.data(), n));
  }
}

TEST_CASE("bf16 values on a GPU: a NaN stays NaN, quiet, with its sign and upper payload") {
  const Stream stream = emu_stream();
  const int64_t n = static_cast<int64_t>(std::size(kNaNs));
  std::vector<float> x;
  for (uint32_t bits : kNaNs) x.push_back(from_bits(bits));
  std::vector<float> rounded = nan_vector(n);
  std::vector<cpu::bf16> narrow(x.size(), cpu::bf16{0});
  emu::round_to_bf16_values(x.data(), rounded.data(), n, stream);
  emu::narrow_to_bf16(x.data(), narrow.data(), n, stream);
  stream.synchronize();
  for (int64_t i = 0; i < n; ++i) {
    INFO("NaN 0x" << std::hex << kNaNs[i]);
    const uint16_t want = static_cast<uint16_t>((kNaNs[i] >> 16) | 0x0040u);  // worked by hand
    CHECK(narrow[i].bits == want);
    CHECK(std::bit_cast<uint32_t>(rounded[i]) == static_cast<uint32_t>(want) << 16);
    CHECK(narrow[i].bits == cpu::to_bf16(x[i]).bits);  // the CPU kernels' bits
  }
}

TEST_CASE("bf16 values on a GPU: an empty tensor launches nothing, a negative size is refused") {
  const Stream stream = emu_stream();
  emu::round_to_bf16_values(nullptr, nullptr, 0, stream);
  CHECK_THROWS_WITH_AS(emu::narrow_to_bf16(nullptr, nullptr, -1, stream),
                       "narrow_to_bf16: n = -1 is negative", Error);
}

// Philox4x32-10 against Random123's published known-answer vectors (its kat_vectors file;
// the same three are in TensorFlow's stateful random ops test), and the float mapping.
#include <doctest/doctest.h>

#include <cstdint>

#include "engine/philox.h"

using brigade::philox4x32_10;
using brigade::philox_uniform;

namespace {
void check_kat(const uint32_t c[4], const uint32_t k[2], const uint32_t want[4]) {
  const brigade::Philox4x32 got = philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1]);
  for (int i = 0; i < 4; ++i) CHECK_MESSAGE(got.v[i] == want[i], "word " << i);
}
}  // namespace

TEST_CASE("philox4x32_10 reproduces Random123's known answers") {
  {
    const uint32_t c[4] = {0, 0, 0, 0}, k[2] = {0, 0};
    const uint32_t want[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    check_kat(c, k, want);
  }
  {
    const uint32_t c[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    const uint32_t k[2] = {0xffffffffu, 0xffffffffu};
    const uint32_t want[4] = {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu};
    check_kat(c, k, want);
  }
  {
    const uint32_t c[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const uint32_t k[2] = {0xa4093822u, 0x299f31d0u};
    const uint32_t want[4] = {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
    check_kat(c, k, want);
  }
}

TEST_CASE("philox_uniform maps a word onto the 2^-24 grid of [0, 1)") {
  CHECK(philox_uniform(0u) == 0.0f);
  CHECK(philox_uniform(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);  // largest value, below 1
  CHECK(philox_uniform(0x80000000u) == 0.5f);
  CHECK(philox_uniform(0x000000ffu) == 0.0f);  // the low 8 bits are dropped
  CHECK(philox_uniform(0x00000100u) == 1.0f / 16777216.0f);
}

// Philox4x32-10: the counter-based random number generator of Salmon, Moraes, Dror and Shaw,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11), as in their Random123 library.
//
// A counter-based generator is a pure function: four 32-bit counter words and two 32-bit key
// words in, four 32-bit random words out. There is no state to carry between calls, so any
// thread on any device can draw "the random number at position c" directly. Brigade derives
// the dropout mask from (seed, step, layer, sample, element) this way, so that recomputation,
// every pipeline schedule and every micro-batch split see exactly the same masks, on the CPU
// and on the GPU alike.
//
// The same code compiles as plain C++ and under nvcc (BRIGADE_HD adds __host__ __device__).
// Checked against Random123's known-answer vectors in tests/engine/philox_test.cpp.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BRIGADE_HD __host__ __device__
#else
#define BRIGADE_HD
#endif

namespace brigade {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {
// Multipliers (round function) and Weyl increments (key schedule) from the paper.
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

// One round: two 32x32->64 multiplications, whose high halves are mixed with the key by XOR
// and whose low halves are permuted into the other lanes (a Feistel-like network).
BRIGADE_HD inline void round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  const uint32_t n0 = hi1 ^ c[1] ^ k0;
  const uint32_t n2 = hi0 ^ c[3] ^ k1;
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}
}  // namespace philox_detail

// Philox4x32-10 of `counter` under `key`: ten rounds, the key bumped between rounds.
BRIGADE_HD inline Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                           uint32_t k0, uint32_t k1) {
  uint32_t c[4] = {c0, c1, c2, c3};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += philox_detail::kW0;
      k1 += philox_detail::kW1;
    }
    philox_detail::round(c, k0, k1);
  }
  return Philox4x32{{c[0], c[1], c[2], c[3]}};
}

// A uniform float in [0, 1) from one random word: its top 24 bits (a float's precision) times
// 2^-24. Every value k * 2^-24, k = 0 .. 2^24 - 1, has probability exactly 2^-24, and 1.0 is
// never produced (rounding the full 32 bits to float could give 1.0f).
BRIGADE_HD inline float philox_uniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace brigade

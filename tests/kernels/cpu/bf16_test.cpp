// bf16 conversions (kernels/cpu/bf16.h) against a rounding worked out another way: in double,
// from the two bf16 neighbours of each float, nearer wins, a tie goes to the even one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;
using cpu::bf16;

namespace {

// The magnitude of a bf16 bit pattern (sign ignored) in double; 0x7F80 reads as 2^128, the
// value rounding must reach to give Inf (as if the exponent range went on).
double magnitude(uint32_t h) {
  const int e = static_cast<int>((h >> 7) & 0xFF), m = static_cast<int>(h & 0x7F);
  return e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
}

// Round-to-nearest-even of a finite or infinite float's bits to bf16 bits, in double.
uint16_t rounded_in_double(uint32_t u) {
  const uint32_t sign = u & 0x80000000u, abs = u & 0x7FFFFFFFu;
  if (abs == 0x7F800000u) return static_cast<uint16_t>(u >> 16);  // ±Inf
  const double x = std::fabs(static_cast<double>(cpu::float_from_bits(u)));
  const uint32_t down = abs >> 16, up = down + 1;  // the neighbours below and above |x|
  const double below = x - magnitude(down), above = magnitude(up) - x;
  const uint32_t pick = below < above ? down : above < below ? up : (down % 2 == 0 ? down : up);
  return static_cast<uint16_t>((sign >> 16) | pick);
}

// A NaN keeps its sign and top payload bits and comes out quiet (an sNaN whose payload lay in
// the low 16 bits would otherwise truncate to Inf).
bool is_quiet_nan_of(uint32_t u, uint16_t h) {
  return (h & 0x7F80u) == 0x7F80u && (h & 0x0040u) != 0 && (h >> 15) == (u >> 31) &&
         (h & 0x003Fu) == ((u >> 16) & 0x003Fu);
}

bool converts_right(uint32_t u, uint16_t got) {
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return nan ? is_quiet_nan_of(u, got) : got == rounded_in_double(u);
}

// Every upper half (sign, exponent, top mantissa bits: all classes, denormals, NaN, Inf) with
// the lower halves that decide rounding: exact, just under a tie, a tie, just over, all ones.
std::vector<uint32_t> rounding_cases() {
  std::vector<uint32_t> bits;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      bits.push_back(hi << 16 | lo);
  return bits;
}

}  // namespace

TEST_CASE("to_bf16: hand-worked values: ties to even, NaN quiet, Inf, overflow, denormals") {
  struct Case {
    uint32_t in;
    uint16_t out;
    const char* why;
  };
  const Case cases[] = {
      {0x3F800000u, 0x3F80, "1.0 exactly"},
      {0x3F808000u, 0x3F80, "1 + 2^-8: a tie, down to the even 1.0"},
      {0x3F818000u, 0x3F82, "1 + 3·2^-8: a tie, up to the even 1 + 2^-6"},
      {0x3F808001u, 0x3F81, "just over a tie: up"},
      {0x3F807FFFu, 0x3F80, "just under a tie: down"},
      {0xBF818000u, 0xBF82, "negative tie: the magnitude to even"},
      {0x80000000u, 0x8000, "-0 stays -0"},
      {0x7F800000u, 0x7F80, "+Inf"},
      {0xFF800000u, 0xFF80, "-Inf"},
      {0x7F7FFFFFu, 0x7F80, "the largest float rounds past the largest bf16: Inf"},
      {0x7F7F7FFFu, 0x7F7F, "just under the overflow tie: the largest bf16"},
      {0x7F7F8000u, 0x7F80, "the overflow tie: to even, which is Inf"},
      {0x7FC00000u, 0x7FC0, "quiet NaN"},
      {0x7F800001u, 0x7FC0, "signalling NaN, payload in the low bits only: still NaN, quiet"},
      {0xFF812345u, 0xFFC1, "negative NaN: sign and top payload kept, made quiet"},
      {0x00018000u, 0x0002, "denormal tie: to even, not flushed"},
      {0x00008000u, 0x0000, "the smallest tie: down to the even +0"},
      {0x000AE398u, 0x000B, "denormal 1e-39: rounded, not flushed"},
      {0x807FFFFFu, 0x8080, "the largest negative denormal rounds up to -FLT_MIN"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    const uint16_t got = cpu::to_bf16(cpu::float_from_bits(c.in)).bits;
    CHECK(got == c.out);
    CHECK(converts_right(c.in, got));  // the double-precision rule agrees with the hand
  }
}

TEST_CASE("to_bf16 and float_to_bf16 on every ISA: the double-precision rounding, bit for bit") {
  const std::vector<uint32_t> bits = rounding_cases();
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) x[i] = cpu::float_from_bits(bits[i]);

  int64_t wrong = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint16_t got = cpu::to_bf16(x[i]).bits;
    if (!converts_right(bits[i], got) && ++wrong <= 5)
      std::printf("  to_bf16(0x%08x) = 0x%04x\n", bits[i], got);
  }
  CHECK(wrong == 0);

  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    INFO("ISA " << cpu::isa_name(isa) << (cpu::use_avx512_bf16() ? " (AVX-512 BF16)" : ""));
    // An odd length: the 32-float blocks and a tail; blocks with and without denormals.
    const int64_t n = static_cast<int64_t>(x.size()) - 7;
    std::vector<bf16> y(static_cast<size_t>(n));
    cpu::float_to_bf16(x.data(), y.data(), n);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += y[i].bits != cpu::to_bf16(x[i]).bits;
    CHECK(differ == 0);

    // Normal numbers only, so that whole blocks take vcvtne2ps2bf16 itself.
    std::vector<float> normal;
    for (float v : x)
      if (std::isnormal(v) || std::isinf(v) || std::isnan(v) || v == 0.0f) normal.push_back(v);
    std::vector<bf16> z(normal.size());
    cpu::float_to_bf16(normal.data(), z.data(), static_cast<int64_t>(normal.size()));
    differ = 0;
    for (size_t i = 0; i < normal.size(); ++i) differ += z[i].bits != cpu::to_bf16(normal[i]).bits;
    CHECK(differ == 0);
  }
}

TEST_CASE("bf16_to_float on every ISA: all 65536 patterns, exact (the bits shifted up)") {
  std::vector<bf16> h(0x10000 + 3);
  for (size_t i = 0; i < h.size(); ++i) h[i].bits = static_cast<uint16_t>(i);
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    INFO("ISA " << cpu::isa_name(isa));
    std::vector<float> y(h.size());
    cpu::bf16_to_float(h.data(), y.data(), static_cast<int64_t>(h.size()));
    int64_t wrong = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      const uint16_t b = h[i].bits;
      const bool negative = (b & 0x8000) != 0, inf = (b & 0x7FFF) == 0x7F80;
      const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
      const double want = (negative ? -1.0 : 1.0) * magnitude(b);
      const bool ok = nan   ? std::isnan(y[i]) && cpu::float_bits(y[i]) == uint32_t{b} << 16
                      : inf ? std::isinf(y[i]) && std::signbit(y[i]) == negative
                            : static_cast<double>(y[i]) == want && std::signbit(y[i]) == negative;
      if (!ok && ++wrong <= 5) std::printf("  bf16_to_float(0x%04x) = %g\n", b, y[i]);
    }
    CHECK(wrong == 0);
  }
}

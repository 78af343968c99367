// MaxPooling2D: the CPU path against the reference, bit for bit on every ISA (a max involves
// no rounding), the documented tie and NaN rules on hand examples, and the reference backward
// against finite differences on inputs whose values are spread far apart (no tie within the
// step).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/cpu/maxpool2d.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/reference/maxpool2d.h"
#include "kernels/reference/relu.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("maxpool2d: the CPU path equals the reference bit for bit, argmax included, on every ISA") {
  struct Case { int64_t N, C, H, W, R, S, stride; Padding padding; };
  const Case cases[] = {
      {2, 64, 24, 24, 2, 2, 2, Padding::valid},  // the question's pools: 2x2 at stride 2
      {2, 16, 10, 10, 2, 2, 2, Padding::valid},
      {3, 8, 3, 3, 2, 2, 2, Padding::valid},     // 3x3 -> 1x1: the last row/column dropped
      {1, 2, 6, 70, 2, 2, 2, Padding::valid},    // 35 outputs a row: 16 + 16 + a masked 3
      {3, 7, 7, 5, 2, 2, 2, Padding::valid},     // odd input: the last row/column is dropped
      {1, 1, 1, 1, 1, 1, 1, Padding::valid},
      {1, 3, 33, 7, 3, 3, 2, Padding::valid},    // overlapping windows
      {2, 3, 7, 7, 3, 3, 2, Padding::same},      // padded cells never win
      {2, 2, 5, 6, 2, 3, 1, Padding::same},
      {2, 3, 8, 8, 2, 2, 2, Padding::same},      // "same" on an even size pads nothing
      {2, 3, 7, 9, 2, 2, 2, Padding::same},      // on an odd one it pads the end: the general walk
  };
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      for (const Case& c : cases) {
        const Pool2dShape s = make_pool2d_shape(c.N, c.C, c.H, c.W, c.R, c.S, c.stride, c.padding);
        INFO("isa " << std::string(cpu::isa_name(isa)) << ", x (" << s.N << "," << s.C << "," << s.H << ","
                    << s.W << ") pool " << s.R << "x" << s.S << " stride " << s.stride << " "
                    << std::string(padding_name(c.padding)) << ", " << threads << " threads");
        // Coarse values (multiples of 1/8 in [-1, 1]) make ties frequent: they must agree
        // too; a few NaNs (each wins its window: the NaN rule) and -0s (a tie with 0).
        auto x = to_float(random_vector(s.x_size(), 21));
        for (auto& v : x) v = static_cast<float>(std::round(v * 8) / 8);
        for (size_t i = 5; i < x.size(); i += 37) x[i] = std::numeric_limits<float>::quiet_NaN();
        for (size_t i = 3; i < x.size(); i += 11) x[i] = -0.0f;
        std::vector<float> y(s.y_size()), yr(s.y_size());
        std::vector<int32_t> a(s.y_size()), ar(s.y_size());
        cpu::maxpool2d_forward(x.data(), y.data(), a.data(), s, pool);
        ref::maxpool2d_forward(x.data(), yr.data(), ar.data(), s);
        CHECK(same_bits(y, yr));
        CHECK(a == ar);
        // dy with -0s: the reference's "zero, then add" turns them into +0.
        auto dy = to_float(random_vector(s.y_size(), 22));
        for (size_t i = 0; i < dy.size(); i += 7) dy[i] = -0.0f;
        std::vector<float> dx(s.x_size(), 7.0f), dxr(s.x_size());  // 7: dx is overwritten
        cpu::maxpool2d_backward(dy.data(), a.data(), dx.data(), s, pool);
        ref::maxpool2d_backward(dy.data(), ar.data(), dxr.data(), s);
        CHECK(same_bits(dx, dxr));  // the same additions in the same order
        // With the ReLU mask taken from the output y: the reference's relu_backward on dy
        // first (y holds zeros, -0s and NaNs: none of them passes), then its backward.
        std::vector<float> masked_dy(dy.size());
        ref::relu_backward(yr.data(), dy.data(), masked_dy.data(), s.y_size());
        std::fill(dx.begin(), dx.end(), 7.0f);
        cpu::maxpool2d_backward(dy.data(), a.data(), dx.data(), s, pool, y.data());
        ref::maxpool2d_backward(masked_dy.data(), ar.data(), dxr.data(), s);
        CHECK(same_bits(dx, dxr));
      }
    }
  }
}

TEST_CASE("maxpool2d: ties go to the first maximum in row-major window order") {
  // One 2x2 window over a 2x3 plane, stride 1: windows [1 3; 3 0] and [3 2; 0 3].
  const float x[6] = {1, 3, 2,
                      3, 0, 3};
  const Pool2dShape s = make_pool2d_shape(1, 1, 2, 3, 2, 2, 1, Padding::valid);
  float y[2];
  int32_t a[2];
  ref::maxpool2d_forward(x, y, a, s);
  CHECK(y[0] == 3.0f);
  CHECK(a[0] == 1);  // (0,1) comes before (1,0)
  CHECK(y[1] == 3.0f);
  CHECK(a[1] == 1);  // (0,1) comes before (1,2)
  // Both windows picked cell 1: backward adds both gradients there.
  const float dy[2] = {0.5f, 0.25f};
  float dx[6];
  ref::maxpool2d_backward(dy, a, dx, s);
  const float want[6] = {0, 0.75f, 0, 0, 0, 0};
  for (int i = 0; i < 6; ++i) CHECK(dx[i] == want[i]);
}

namespace {

// A quiet NaN whose bits say which cell it came from: y must carry the winner's own bits.
float nan_with_payload(uint32_t payload) { return std::bit_cast<float>(0x7FC00000u | payload); }

// One plane pooled by hand: y's bits, argmax and dx, from the reference and from the CPU path
// on every ISA.
void check_by_hand(const Pool2dShape& s, const std::vector<float>& x, const std::vector<float>& y_want,
                   const std::vector<int32_t>& argmax_want, const std::vector<float>& dy,
                   const std::vector<float>& dx_want) {
  std::vector<float> y(s.y_size()), dx(s.x_size());
  std::vector<int32_t> a(s.y_size());
  ref::maxpool2d_forward(x.data(), y.data(), a.data(), s);
  ref::maxpool2d_backward(dy.data(), a.data(), dx.data(), s);
  CHECK(same_bits(y, y_want));
  CHECK(a == argmax_want);
  CHECK(same_bits(dx, dx_want));
  ThreadPool pool(1);
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    INFO("isa " << std::string(cpu::isa_name(isa)));
    std::fill(y.begin(), y.end(), 7.0f);
    std::fill(a.begin(), a.end(), -1);
    std::fill(dx.begin(), dx.end(), 7.0f);
    cpu::maxpool2d_forward(x.data(), y.data(), a.data(), s, pool);
    cpu::maxpool2d_backward(dy.data(), a.data(), dx.data(), s, pool);
    CHECK(same_bits(y, y_want));
    CHECK(a == argmax_want);
    CHECK(same_bits(dx, dx_want));
  }
}

}  // namespace

TEST_CASE("maxpool2d: a window holding a NaN outputs its first NaN, which takes the gradient") {
  const float inf = std::numeric_limits<float>::infinity();
  const float na = nan_with_payload(1), nb = nan_with_payload(2), nc = nan_with_payload(3),
              nd = std::bit_cast<float>(0xFFC00000u),  // negative: x86's NaN of 0 * inf
              ne = nan_with_payload(5);
  SUBCASE("2x2 windows at stride 2 (the question's pools: their own loops)") {
    // Four windows, each [a b; c d]:
    //   [1 na; 5 2]      a later larger number does not replace the NaN  -> cell 1
    //   [7 3; nc nd]     the first of two NaNs                           -> cell 10
    //   [nb 9; 4 4]      a NaN first in its window                       -> cell 4
    //   [inf 0; 0 ne]    NaN ranks above +inf                            -> cell 15
    const Pool2dShape s = make_pool2d_shape(1, 1, 2, 8, 2, 2, 2, Padding::valid);
    const std::vector<float> x = {1, na, 7, 3, nb, 9, inf, 0,
                                  5, 2, nc, nd, 4, 4, 0, ne};
    std::vector<float> dx_want(16, 0.0f);
    dx_want[1] = 0.5f, dx_want[10] = 0.25f, dx_want[4] = 2.0f, dx_want[15] = -1.0f;
    check_by_hand(s, x, {na, nc, nb, ne}, {1, 10, 4, 15}, {0.5f, 0.25f, 2.0f, -1.0f}, dx_want);
  }
  SUBCASE("overlapping windows (2x2 at stride 1: the general walk)") {
    // Windows [1 na; 3 4], [na 2; 4 nd], [3 4; 5 6], [4 nd; 6 7]: cells 1, 1, 7 (a number:
    // 6), 5. Cell 1 wins twice: its gradients add.
    const Pool2dShape s = make_pool2d_shape(1, 1, 3, 3, 2, 2, 1, Padding::valid);
    const std::vector<float> x = {1, na, 2,
                                  3, 4, nd,
                                  5, 6, 7};
    check_by_hand(s, x, {na, na, 6, nd}, {1, 1, 7, 5}, {0.5f, 0.25f, 1.0f, 2.0f},
                  {0, 0.75f, 0, 0, 0, 2.0f, 0, 1.0f, 0});
  }
}

TEST_CASE("maxpool2d: the reference backward matches finite differences (double)") {
  const Pool2dShape s = make_pool2d_shape(2, 3, 7, 6, 3, 2, 2, Padding::same);
  // Distinct values 0.01 apart, shuffled: every window's maximum leads by >= 0.01 >> h, so
  // the finite difference never crosses a tie (the kink of max).
  std::vector<double> x(s.x_size());
  std::iota(x.begin(), x.end(), 0.0);
  std::shuffle(x.begin(), x.end(), std::mt19937_64(31));
  for (auto& v : x) v *= 0.01;
  const auto G = random_vector(s.y_size(), 32);
  auto loss = [&] {
    std::vector<double> y(s.y_size());
    std::vector<int32_t> a(s.y_size());
    ref::maxpool2d_forward(x.data(), y.data(), a.data(), s);
    return dot(y, G);
  };
  std::vector<double> y(s.y_size()), dx(s.x_size());
  std::vector<int32_t> a(s.y_size());
  ref::maxpool2d_forward(x.data(), y.data(), a.data(), s);
  ref::maxpool2d_backward(G.data(), a.data(), dx.data(), s);
  CHECK(gradient_matches("x", x, dx, loss));
}

TEST_CASE("maxpool2d shapes: a pool larger than the input is rejected by name") {
  CHECK_THROWS_WITH_AS(make_pool2d_shape(1, 64, 1, 1, 2, 2, 2, Padding::valid),
                       doctest::Contains("maxpool2d: a 2x2 pool does not fit the input (1, 64, 1, 1)"),
                       std::invalid_argument);
  const Pool2dShape s = make_pool2d_shape(1, 64, 3, 3, 2, 2, 2, Padding::valid);
  CHECK(s.P == 1);  // the question's last pooling: 3x3 -> 1x1
}

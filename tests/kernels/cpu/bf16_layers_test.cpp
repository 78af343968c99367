// Dense and Conv2D in precision bf16 (kernels/cpu/dense_bf16.h, conv2d/bf16.h) against the
// reference in double on the same operands rounded to bf16 (kernels/reference/bf16.h), on
// every ISA path this CPU has, 1 and 3 threads giving the same bits.
//
// The tolerance is float's (check.h's sum_tolerance), not bf16's: a product of two bf16
// values is exact in float (8 + 8 significant bits), so the kernel and the reference differ
// only by the float rounding of the sums. An operand left unrounded, or rounded another way
// (truncated, ties away), moves a sum by about 2^-9 of its terms: hundreds of times over.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/thread_pool.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/bf16_values.h"
#include "kernels/cpu/conv2d/bf16.h"
#include "kernels/cpu/conv2d/lowering.h"
#include "kernels/cpu/dense_bf16.h"
#include "kernels/reference/bf16.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;

namespace {

// Magnitudes of the reference's terms, for sum_tolerance: the same reference run on |operands|.
std::vector<double> abs_bf16(const std::vector<float>& v) { return abs_of(ref::bf16_operands(v)); }

struct DenseCase {
  int64_t N, in, out;
};
// Odd sizes on every side, one longer than a gemm_bf16 depth block (256) with an odd K, and
// the question's dense_1 (1600 -> 128 at batch 64 would be slow here: its shape less batch).
const DenseCase kDenseCases[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {65, 301, 40}, {9, 1600, 128}};

struct DenseResult {
  std::vector<float> y, dx, dw;
};

DenseResult run_dense(const DenseCase& c, const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& b, const std::vector<float>& dy,
                      const std::vector<float>& dw0, int threads) {
  ThreadPool pool(threads);
  DenseResult r{std::vector<float>(c.N * c.out), std::vector<float>(c.N * c.in), dw0};
  cpu::dense_forward_bf16(x.data(), w.data(), b.data(), r.y.data(), c.N, c.in, c.out, pool, true);
  cpu::dense_backward_data_bf16(dy.data(), w.data(), r.dx.data(), c.N, c.in, c.out, pool);
  cpu::dense_backward_weight_bf16(x.data(), dy.data(), r.dw.data(), c.N, c.in, c.out, pool);
  return r;
}

}  // namespace

TEST_CASE("dense in bf16: every pass against the reference on bf16 operands, 1 and 3 threads") {
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const DenseCase& c : kDenseCases) {
      CAPTURE(cpu::isa_name(isa));
      CAPTURE(c.N);
      CAPTURE(c.in);
      CAPTURE(c.out);
      const auto x = to_float(random_vector(c.N * c.in, 1));
      const auto w = to_float(random_vector(c.out * c.in, 2));
      const auto b = to_float(random_vector(c.out, 3));
      const auto dy = to_float(random_vector(c.N * c.out, 4));
      const auto dw0 = to_float(random_vector(c.out * c.in, 5));  // accumulated into

      // The reference: operands rounded, sums in double; bias, ReLU and dw's sum unrounded.
      const auto xr = ref::bf16_operands(x), wr = ref::bf16_operands(w);
      const auto dyr = ref::bf16_operands(dy);
      std::vector<double> y(c.N * c.out), dx(c.N * c.in), dw(c.out * c.in, 0.0);
      std::vector<double> ay(c.N * c.out), adx(c.N * c.in), adw(c.out * c.in, 0.0);
      ref::dense_forward(xr.data(), wr.data(), static_cast<const double*>(nullptr), y.data(),
                         c.N, c.in, c.out);
      ref::dense_backward_data(dyr.data(), wr.data(), dx.data(), c.N, c.in, c.out);
      ref::dense_backward_weight(xr.data(), dyr.data(), dw.data(), c.N, c.in, c.out);
      const auto ax = abs_bf16(x), aw = abs_bf16(w), ady = abs_bf16(dy);
      ref::dense_forward(ax.data(), aw.data(), static_cast<const double*>(nullptr), ay.data(),
                         c.N, c.in, c.out);
      ref::dense_backward_data(ady.data(), aw.data(), adx.data(), c.N, c.in, c.out);
      ref::dense_backward_weight(ax.data(), ady.data(), adw.data(), c.N, c.in, c.out);
      for (int64_t n = 0; n < c.N; ++n)
        for (int64_t o = 0; o < c.out; ++o) {
          const size_t i = static_cast<size_t>(n * c.out + o);
          y[i] = std::max(y[i] + b[o], 0.0);
          ay[i] += std::fabs(b[o]);
        }
      for (size_t i = 0; i < dw.size(); ++i) {
        dw[i] += dw0[i];
        adw[i] += std::fabs(dw0[i]);
      }

      const DenseResult one = run_dense(c, x, w, b, dy, dw0, 1);
      CHECK(all_close("y", one.y.data(), y, sum_tolerance(ay, c.in + 1)));
      CHECK(all_close("dx", one.dx.data(), dx, sum_tolerance(adx, c.out)));
      CHECK(all_close("dw", one.dw.data(), dw, sum_tolerance(adw, c.N + 1)));
      const DenseResult three = run_dense(c, x, w, b, dy, dw0, 3);
      CHECK(same_bits(one.y, three.y));
      CHECK(same_bits(one.dx, three.dx));
      CHECK(same_bits(one.dw, three.dw));
    }
  }
}

namespace {

struct ConvCase {
  int64_t N, C, H, W, K, R, S, stride;
  Padding padding;
};
// The shapes fp32 sends to Winograd (3x3 stride 1, 4+ channels) and to the direct
// single-channel kernel (C = 1, stride 1, AVX-512), which bf16 runs the same way on rounded
// operands in its forward and backward-filter (by im2col in backward-data); same padding with
// odd and even windows, stride 2 and 3, pointwise, a window as large as the input, several
// samples per group (small P·Q), odd everything.
const ConvCase kConvCases[] = {
    {2, 1, 28, 28, 32, 3, 3, 1, Padding::valid},  // question's conv1 (fp32: direct)
    {2, 8, 10, 9, 6, 3, 3, 1, Padding::same},     // fp32: Winograd
    {2, 3, 7, 5, 4, 3, 3, 2, Padding::same},
    {3, 2, 9, 8, 33, 3, 2, 1, Padding::same},
    {2, 33, 6, 7, 7, 1, 1, 1, Padding::valid},    // pointwise
    {1, 3, 5, 5, 1, 5, 5, 1, Padding::valid},     // 1x1 output
    {4, 7, 11, 13, 3, 4, 4, 3, Padding::same},    // even window, stride 3
    {25, 2, 12, 12, 3, 3, 3, 1, Padding::valid},  // P·Q = 100: several samples per group
    {3, 40, 5, 6, 9, 3, 3, 1, Padding::valid},    // CRS = 360: two gemm_bf16 depth blocks
};

struct ConvResult {
  std::vector<float> y, dx, dw;
};

ConvResult run_conv(const Conv2dShape& s, const std::vector<float>& x,
                    const std::vector<float>& w, const std::vector<float>& b,
                    const std::vector<float>& dy, const std::vector<float>& relu_x,
                    const std::vector<float>& dw0, int threads) {
  ThreadPool pool(threads);
  std::vector<float> ws(static_cast<size_t>(cpu::conv2d_bf16_workspace_floats(s, pool)));
  ConvResult r{std::vector<float>(s.N * s.K * s.P * s.Q),
               std::vector<float>(s.N * s.C * s.H * s.W), dw0};
  cpu::conv2d_forward_bf16(x.data(), w.data(), b.data(), r.y.data(), s, pool, ws.data(), true);
  cpu::conv2d_backward_data_bf16(dy.data(), w.data(), r.dx.data(), s, pool, ws.data(),
                                 relu_x.data());
  cpu::conv2d_backward_filter_bf16(x.data(), dy.data(), r.dw.data(), s, pool, nullptr);
  return r;
}

// A convolution's random operands for shape s, from six consecutive seeds starting at `seed`;
// relu_x has about half its values <= 0.
struct ConvOperands {
  std::vector<float> x, w, b, dy, relu_x, dw0;
};
ConvOperands conv_operands(const Conv2dShape& s, uint64_t seed) {
  const int64_t xn = s.N * s.C * s.H * s.W, wn = s.K * s.C * s.R * s.S;
  const int64_t yn = s.N * s.K * s.P * s.Q;
  return {to_float(random_vector(xn, seed)),     to_float(random_vector(wn, seed + 1)),
          to_float(random_vector(s.K, seed + 2)), to_float(random_vector(yn, seed + 3)),
          to_float(random_vector(xn, seed + 4)), to_float(random_vector(wn, seed + 5))};
}

}  // namespace

TEST_CASE("conv2d in bf16: every pass against the reference on bf16 operands, 1 and 3 threads") {
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const ConvCase& c : kConvCases) {
      const Conv2dShape s =
          make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      CAPTURE(cpu::isa_name(isa));
      CAPTURE(c.N);
      CAPTURE(c.C);
      CAPTURE(c.H);
      CAPTURE(c.W);
      CAPTURE(c.K);
      CAPTURE(c.R);
      CAPTURE(c.S);
      CAPTURE(c.stride);
      const int64_t xn = s.N * s.C * s.H * s.W, wn = s.K * s.C * s.R * s.S;
      const int64_t yn = s.N * s.K * s.P * s.Q;
      const ConvOperands ops = conv_operands(s, 11);
      const auto& [x, w, b, dy, relu_x, dw0] = ops;

      const auto xr = ref::bf16_operands(x), wr = ref::bf16_operands(w);
      const auto dyr = ref::bf16_operands(dy);
      const auto ax = abs_bf16(x), aw = abs_bf16(w), ady = abs_bf16(dy);
      std::vector<double> y(yn), dx(xn), dw(wn, 0.0), ay(yn), adx(xn), adw(wn, 0.0);
      ref::conv2d_forward(xr.data(), wr.data(), static_cast<const double*>(nullptr), y.data(), s);
      ref::conv2d_backward_data(dyr.data(), wr.data(), dx.data(), s);
      ref::conv2d_backward_filter(xr.data(), dyr.data(), dw.data(), s);
      ref::conv2d_forward(ax.data(), aw.data(), static_cast<const double*>(nullptr), ay.data(), s);
      ref::conv2d_backward_data(ady.data(), aw.data(), adx.data(), s);
      ref::conv2d_backward_filter(ax.data(), ady.data(), adw.data(), s);
      const int64_t PQ = s.P * s.Q;
      for (int64_t i = 0; i < yn; ++i) {
        const int64_t k = (i / PQ) % s.K;
        y[i] = std::max(y[i] + b[k], 0.0);
        ay[i] += std::fabs(b[k]);
      }
      for (int64_t i = 0; i < xn; ++i)
        if (!(relu_x[i] > 0.0f)) dx[i] = 0.0;
      for (int64_t i = 0; i < wn; ++i) {
        dw[i] += dw0[i];
        adw[i] += std::fabs(dw0[i]);
      }

      const ConvResult one = run_conv(s, x, w, b, dy, relu_x, dw0, 1);
      CHECK(all_close("y", one.y.data(), y, sum_tolerance(ay, s.C * s.R * s.S + 1)));
      CHECK(all_close("dx", one.dx.data(), dx, sum_tolerance(adx, s.K * s.R * s.S)));
      CHECK(all_close("dw", one.dw.data(), dw, sum_tolerance(adw, s.N * PQ + 8)));
      const ConvResult three = run_conv(s, x, w, b, dy, relu_x, dw0, 3);
      CHECK(same_bits(one.y, three.y));
      CHECK(same_bits(one.dx, three.dx));
      CHECK(same_bits(one.dw, three.dw));
    }
  }
}

// Where bf16 runs a pass through the float path (Winograd, the direct kernel: conv2d/bf16.h),
// an operand that holds bf16 values already is used in place, as every layer's input is in a
// bf16 run; one that does not is rounded into the workspace. Both must be the same
// computation: the same bits from x and from x rounded beforehand, on every shape and ISA.
TEST_CASE("conv2d in bf16: operands already bf16 values give the bits of operands it rounds") {
  const auto rounded = [](const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = ref::round_to_bf16(v[i]);
    return r;
  };
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const ConvCase& c : kConvCases) {
      const Conv2dShape s =
          make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      CAPTURE(cpu::isa_name(isa));
      CAPTURE(c.C);
      CAPTURE(c.K);
      CAPTURE(c.stride);
      const ConvOperands o = conv_operands(s, 21);
      const ConvResult by_kernel = run_conv(s, o.x, o.w, o.b, o.dy, o.relu_x, o.dw0, 2);
      const ConvResult given =
          run_conv(s, rounded(o.x), rounded(o.w), o.b, rounded(o.dy), o.relu_x, o.dw0, 2);
      CHECK(same_bits(by_kernel.y, given.y));
      CHECK(same_bits(by_kernel.dx, given.dx));
      CHECK(same_bits(by_kernel.dw, given.dw));
    }
  }
}

TEST_CASE("holds_bf16_values: whether rounding to bf16 would change nothing, worked by hand") {
  ThreadPool pool(3);
  const auto holds = [&](const std::vector<float>& v) {
    return cpu::holds_bf16_values(v.data(), static_cast<int64_t>(v.size()), pool);
  };
  CHECK(holds({}));
  CHECK(holds({0.0f, -0.0f, 1.0f, -2.5f, 1.0f + 0x1p-7f, std::numeric_limits<float>::infinity()}));
  CHECK_FALSE(holds({1.0f + 0x1p-8f}));  // a bit below bf16's last: not a bf16 value
  CHECK_FALSE(holds({0x1p-149f}));        // the smallest subnormal: low bits only
  // Ranges of 2^14 elements go to the pool's threads: one value off in the last range.
  std::vector<float> long_run(100000, 0.75f);
  CHECK(holds(long_run));
  long_run.back() = 0.1f;
  CHECK_FALSE(holds(long_run));
}

TEST_CASE("round_to_bf16, the references' rounding: ties to even, worked by hand") {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the even neighbour is 1.
  CHECK(ref::round_to_bf16(1.0f + 0x1p-8f) == 1.0f);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd last bit) and 1 + 2^-6 (even).
  CHECK(ref::round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  CHECK(ref::round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);  // above half: up
  CHECK(ref::round_to_bf16(-(1.0f + 0x1p-8f + 0x1p-20f)) == -(1.0f + 0x1p-7f));
  CHECK(std::isinf(ref::round_to_bf16(std::numeric_limits<float>::max())));  // past the top
}

TEST_CASE("im2col in bf16: the bits of the float im2col rounded, every test shape") {
  for (const ConvCase& c : kConvCases) {
    const Conv2dShape s = make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    CAPTURE(c.C);
    CAPTURE(c.H);
    CAPTURE(c.W);
    CAPTURE(c.R);
    CAPTURE(c.S);
    CAPTURE(c.stride);
    const int64_t chw = s.C * s.H * s.W, rows = s.C * s.R * s.S, PQ = s.P * s.Q;
    const auto x = to_float(random_vector(chw, 21));
    std::vector<cpu::bf16> x16(static_cast<size_t>(chw));
    cpu::float_to_bf16(x.data(), x16.data(), chw);
    std::vector<float> col(static_cast<size_t>(rows * PQ));
    cpu::lowering::im2col_ld_portable(x.data(), col.data(), PQ, s);
    std::vector<cpu::bf16> want(col.size()), got(col.size(), cpu::bf16{0xFFFF});
    cpu::float_to_bf16(col.data(), want.data(), rows * PQ);
    cpu::lowering::im2col_ld_bf16(x16.data(), got.data(), PQ, s);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(cpu::bf16)) == 0);
  }
}

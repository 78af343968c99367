// Conv2D: fast CPU path against the reference (in double, on the same float inputs), and the
// reference's backward against finite differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "engine/error.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/relu.h"
#include "kernels/cpu/conv2d/lowering.h"
#include "kernels/cpu/conv2d/winograd.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/relu.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;

namespace {

struct Case {
  int64_t N, C, H, W, K, R, S, stride;
  Padding padding;
};

// Batch 1, odd sizes, stride 2 and 3, same padding with odd and even windows, the pointwise
// (no im2col) path, a 1x1 kernel with stride (im2col path), a window as large as the input,
// the question's conv1 and conv2, and small outputs that the CPU path lowers several samples
// at a time (groups that do not divide a thread's share of the batch). The single-channel
// cases (C = 1, the direct forward on AVX-512) cover output rows shorter than, equal to and
// longer than one 16-lane block, K not a multiple of the 8-filter block, same padding with
// odd and even windows, and stride 2 (which stays on im2col). The last three run the
// AVX-512 im2col on padded and unpadded multi-channel inputs with rows of 10..19 floats.
const Case kCases[] = {
    {1, 1, 28, 28, 32, 3, 3, 1, Padding::valid},   // question's conv1
    {2, 32, 26, 26, 64, 3, 3, 1, Padding::valid},  // question's conv2
    {2, 3, 7, 5, 4, 3, 3, 2, Padding::same},
    {3, 2, 9, 8, 33, 3, 2, 1, Padding::same},
    {2, 33, 6, 7, 7, 1, 1, 1, Padding::valid},     // pointwise
    {3, 5, 7, 9, 3, 1, 1, 2, Padding::valid},      // 1x1 but strided
    {1, 3, 5, 5, 1, 5, 5, 1, Padding::valid},      // window = input: 1x1 output
    {4, 7, 11, 13, 3, 4, 4, 3, Padding::same},     // even window, stride 3
    {5, 1, 3, 3, 2, 3, 3, 1, Padding::same},
    {25, 2, 12, 12, 3, 3, 3, 1, Padding::valid},   // P·Q = 100: 8 groups of 3, then 1
    {3, 1, 18, 18, 8, 3, 3, 1, Padding::valid},    // C = 1: Q = 16, one full block
    {4, 1, 7, 35, 11, 3, 3, 1, Padding::same},     // C = 1: Q = 35 (16 + 16 + 3), K = 8 + 3
    {3, 1, 9, 6, 5, 4, 2, 1, Padding::same},       // C = 1: even window, K < 8, Q < 16
    {2, 1, 13, 11, 9, 5, 5, 1, Padding::valid},    // C = 1: 5x5
    {2, 1, 9, 9, 4, 3, 3, 2, Padding::same},       // C = 1 but strided: im2col
    {2, 20, 9, 10, 5, 3, 3, 1, Padding::same},     // more channels than one 16-float block
    {3, 40, 8, 19, 6, 4, 2, 1, Padding::same},     // rows of 19: a block and a masked tail
    {2, 64, 12, 12, 16, 3, 3, 1, Padding::valid},  // the question's conv3 (K cut to 16)
    // Winograd F(2x2, 3x3) (kernels/cpu/conv2d/winograd.h; the question's conv2 and conv3 above take it
    // too), all three passes: odd output sizes (half-filled tiles) with same padding, rows
    // of 19 tiles (a 16-tile block and a masked tail), several samples per group, and the
    // smallest channel counts it takes (4).
    {2, 6, 9, 37, 5, 3, 3, 1, Padding::same},
    {3, 4, 8, 8, 4, 3, 3, 1, Padding::valid},
    {2, 5, 11, 7, 6, 3, 3, 1, Padding::same},
};

void check_case(const Case& c, ThreadPool& pool) {
  const Conv2dShape s = make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
  INFO("x (" << s.N << "," << s.C << "," << s.H << "," << s.W << ") K=" << s.K << " " << s.R
             << "x" << s.S << " stride " << s.stride << " " << padding_name(c.padding)
             << " threads " << pool.size());
  // Operands rounded to float once; the reference runs in double on the very same values.
  const auto x = to_double(to_float(random_vector(s.x_size(), 1)));
  const auto w = to_double(to_float(random_vector(s.w_size(), 2)));
  const auto b = to_double(to_float(random_vector(s.K, 3)));
  const auto dy = to_double(to_float(random_vector(s.y_size(), 4)));
  const auto dw0 = to_double(to_float(random_vector(s.w_size(), 5)));  // accumulated into
  const auto db0 = to_double(to_float(random_vector(s.K, 6)));
  const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), dyf = to_float(dy);
  std::vector<float> ws(static_cast<size_t>(cpu::conv2d_workspace_floats(s, pool)));

  // forward: each output sums C·R·S products and the bias
  std::vector<double> y(s.y_size()), ymag(s.y_size());
  ref::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s);
  ref::conv2d_forward(abs_of(x).data(), abs_of(w).data(), abs_of(b).data(), ymag.data(), s);
  const auto ytol = sum_tolerance(ymag, s.C * s.R * s.S + 1);
  std::vector<float> yf(s.y_size());
  cpu::conv2d_forward(xf.data(), wf.data(), bf.data(), yf.data(), s, pool, ws.data());
  CHECK(all_close("conv2d_forward", yf.data(), y, ytol));

  // forward with the fused ReLU (relu is exact, so the same tolerance holds)
  std::vector<double> yr(y.size());
  ref::relu_forward(y.data(), yr.data(), static_cast<int64_t>(y.size()));
  cpu::conv2d_forward(xf.data(), wf.data(), bf.data(), yf.data(), s, pool, nullptr, true);
  CHECK(all_close("conv2d_forward+relu", yf.data(), yr, ytol));

  // backward-data: each dx sums at most K·R·S products
  std::vector<double> dx(s.x_size()), dxmag(s.x_size());
  ref::conv2d_backward_data(dy.data(), w.data(), dx.data(), s);
  ref::conv2d_backward_data(abs_of(dy).data(), abs_of(w).data(), dxmag.data(), s);
  std::vector<float> dxf(s.x_size(), 123.0f);  // overwritten, whatever was there
  cpu::conv2d_backward_data(dyf.data(), wf.data(), dxf.data(), s, pool, ws.data());
  CHECK(all_close("conv2d_backward_data", dxf.data(), dx, sum_tolerance(dxmag, s.K * s.R * s.S)));

  // backward-filter, accumulated onto dw0: each sums N·P·Q products, plus the old value
  std::vector<double> dw = dw0, dwmag = abs_of(dw0);
  ref::conv2d_backward_filter(x.data(), dy.data(), dw.data(), s);
  ref::conv2d_backward_filter(abs_of(x).data(), abs_of(dy).data(), dwmag.data(), s);
  std::vector<float> dwf = to_float(dw0);
  cpu::conv2d_backward_filter(xf.data(), dyf.data(), dwf.data(), s, pool, ws.data());
  CHECK(all_close("conv2d_backward_filter", dwf.data(), dw,
                  sum_tolerance(dwmag, s.N * s.P * s.Q + 1)));

  // backward-bias, accumulated onto db0
  std::vector<double> db = db0, dbmag = abs_of(db0);
  ref::conv2d_backward_bias(dy.data(), db.data(), s);
  ref::conv2d_backward_bias(abs_of(dy).data(), dbmag.data(), s);
  std::vector<float> dbf = to_float(db0);
  cpu::conv2d_backward_bias(dyf.data(), dbf.data(), s, pool);
  CHECK(all_close("conv2d_backward_bias", dbf.data(), db, sum_tolerance(dbmag, s.N * s.P * s.Q + 1)));
}

}  // namespace

TEST_CASE("conv2d: the fast CPU path matches the reference on every shape, ISA and 1..3 threads") {
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      INFO("isa " << std::string(cpu::isa_name(isa)));
      for (const Case& c : kCases) check_case(c, pool);
    }
  }
}

TEST_CASE("conv2d: backward-data with a ReLU's output masks like relu_backward, bit for bit") {
  // Half the inputs negative or zero (a ReLU's output is never negative, but the mask's test
  // is all that matters here): the masked dx must be relu_backward of the unmasked one.
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : kCases) {
      const Conv2dShape s =
          make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      INFO("x (" << s.N << "," << s.C << "," << s.H << "," << s.W << ") w (" << s.K << ","
                 << s.C << "," << s.R << "," << s.S << "), " << threads << " threads");
      const auto dy = to_float(random_vector(s.y_size(), 41));
      const auto w = to_float(random_vector(s.w_size(), 42));
      auto relu_x = to_float(random_vector(s.x_size(), 43));
      for (size_t i = 0; i < relu_x.size(); i += 5) relu_x[i] = 0.0f;
      std::vector<float> dx(s.x_size()), masked(s.x_size()), want(s.x_size());
      cpu::conv2d_backward_data(dy.data(), w.data(), dx.data(), s, pool, nullptr);
      cpu::conv2d_backward_data(dy.data(), w.data(), masked.data(), s, pool, nullptr,
                                relu_x.data());
      cpu::relu_backward(relu_x.data(), dx.data(), want.data(), s.x_size(), pool);
      CHECK(masked == want);
      CHECK(std::count(masked.begin(), masked.end(), 0.0f) > s.x_size() / 5);
    }
  }
}

TEST_CASE("conv2d: the AVX-512 im2col equals the portable one bit for bit") {
  if (cpu::detected_isa() != cpu::Isa::avx512) {
    MESSAGE("this CPU lacks AVX-512F: nothing to compare");
    return;
  }
  // Copies are exact: same bits, and the same zeros in padding.
  for (const Case& c : kCases) {
    const Conv2dShape s = make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    INFO("x (" << s.C << "," << s.H << "," << s.W << ") " << s.R << "x" << s.S << " stride "
               << s.stride << " " << padding_name(c.padding));
    const int64_t rows = s.C * s.R * s.S, ld = s.P * s.Q + 5;  // a wider col: ld > P·Q
    const auto x = to_float(random_vector(s.C * s.H * s.W, 7));
    std::vector<float> col_p(rows * ld, -1.0f), col_v(rows * ld, -1.0f);
    cpu::lowering::im2col_ld_portable(x.data(), col_p.data(), ld, s);
    cpu::lowering::im2col_ld_avx512(x.data(), col_v.data(), ld, s);
    CHECK(col_p == col_v);  // including the 5 untouched columns of every row
  }
}

TEST_CASE("conv2d: the fast CPU path is deterministic for a given thread count") {
  // Two runs on the same pool give the same bits (the pipeline parity tests rely on it), on the
  // direct single-channel kernels, Winograd, and im2col + SGEMM alike.
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const Case& c : {kCases[0], kCases[1], kCases[9], kCases[11]}) {
      const Conv2dShape s =
          make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      ThreadPool pool(3);
      const auto x = to_float(random_vector(s.x_size(), 1));
      const auto dy = to_float(random_vector(s.y_size(), 2));
      const auto w = to_float(random_vector(s.w_size(), 3));
      auto run = [&] {
        std::vector<float> y(s.y_size()), dw(s.w_size(), 0.0f), db(s.K, 0.0f);
        cpu::conv2d_forward(x.data(), w.data(), nullptr, y.data(), s, pool, nullptr, true);
        cpu::conv2d_backward_filter(x.data(), dy.data(), dw.data(), s, pool, nullptr);
        cpu::conv2d_backward_bias(dy.data(), db.data(), s, pool);
        y.insert(y.end(), dw.begin(), dw.end());
        y.insert(y.end(), db.begin(), db.end());
        return y;
      };
      CHECK(run() == run());
    }
  }
}

TEST_CASE("conv2d: every pass gives the same bits on 1, 2 and 3 threads") {
  // Work is cut into groups and chunks from the shape alone, chunks' sums are added in chunk
  // order (kernels/cpu/chunks.h): the thread count changes who computes what, never the bits.
  // Every case with 5x its batch, so that groups hold several samples and backward-filter's
  // 8 chunks hold several groups, the last one short; im2col, pointwise, direct and Winograd.
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const Case& c : kCases) {
      const Conv2dShape s =
          make_conv2d_shape(c.N * 5, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      INFO("isa " << std::string(cpu::isa_name(isa)) << " x (" << s.N << "," << s.C << ","
                  << s.H << "," << s.W << ") K=" << s.K << " " << s.R << "x" << s.S
                  << " stride " << s.stride);
      const auto x = to_float(random_vector(s.x_size(), 1));
      const auto w = to_float(random_vector(s.w_size(), 2));
      const auto b = to_float(random_vector(s.K, 3));
      const auto dy = to_float(random_vector(s.y_size(), 4));
      const auto dw0 = to_float(random_vector(s.w_size(), 5));
      const auto relu_x = to_float(random_vector(s.x_size(), 6));
      // forward with ReLU, backward-data with relu_x's mask, backward-filter onto dw0, bias
      auto passes_on = [&](int threads) {
        ThreadPool pool(threads);
        std::vector<float> ws(static_cast<size_t>(cpu::conv2d_workspace_floats(s, pool)));
        std::vector<float> y(s.y_size()), dx(s.x_size()), dw = dw0, db(s.K, 0.0f);
        cpu::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s, pool, ws.data(), true);
        cpu::conv2d_backward_data(dy.data(), w.data(), dx.data(), s, pool, ws.data(),
                                  relu_x.data());
        cpu::conv2d_backward_filter(x.data(), dy.data(), dw.data(), s, pool, ws.data());
        cpu::conv2d_backward_bias(dy.data(), db.data(), s, pool);
        return std::vector<std::vector<float>>{y, dx, dw, db};
      };
      const auto one = passes_on(1);
      for (int threads : {2, 3}) {
        const auto more = passes_on(threads);
        INFO(threads << " threads against 1");
        CHECK(same_bits(more[0], one[0]));  // forward
        CHECK(same_bits(more[1], one[1]));  // backward-data
        CHECK(same_bits(more[2], one[2]));  // backward-filter
        CHECK(same_bits(more[3], one[3]));  // bias
      }
    }
  }
}

TEST_CASE("conv2d: the bias gradient has the same bits on every ISA and thread count") {
  for (const Case& c : kCases) {
    const Conv2dShape s = make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    INFO("dy (" << s.N << "," << s.K << "," << s.P << "," << s.Q << ")");
    const auto dy = to_float(random_vector(s.y_size(), 9));
    const auto db0 = to_float(random_vector(s.K, 10));
    std::optional<std::vector<float>> first;
    for (cpu::Isa isa : runnable_isas()) {
      ForcedIsa forced(isa);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> db = db0;
        cpu::conv2d_backward_bias(dy.data(), db.data(), s, pool);
        if (!first) first = db;
        CHECK(std::memcmp(db.data(), first->data(), db.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("conv2d: a NaN input reaches the output through the fused ReLU on every path") {
  // The pipeline's finiteness check relies on it: max(NaN, 0) must stay NaN, not become 0.
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    // the direct C = 1 forward, Winograd (conv2), im2col + SGEMM (two channels)
    for (const Case& c : {kCases[0], kCases[1], kCases[9]}) {
      const Conv2dShape s =
          make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
      INFO("isa " << std::string(cpu::isa_name(isa)) << " C = " << s.C);
      ThreadPool pool(1);
      auto x = to_float(random_vector(s.x_size(), 1));
      const auto w = to_float(random_vector(s.w_size(), 2));
      x[0] = std::numeric_limits<float>::quiet_NaN();  // read by output (0, k, 0, 0) for all k
      std::vector<float> y(s.y_size());
      cpu::conv2d_forward(x.data(), w.data(), nullptr, y.data(), s, pool, nullptr, true);
      for (int64_t k = 0; k < s.K; ++k) CHECK(std::isnan(y[k * s.P * s.Q]));
    }
  }
}

TEST_CASE("conv2d ISA choice: BRIGADE_CPU_ISA forces the portable path; a wrong value is named") {
  // Whatever the environment says is put back afterwards, for the tests that follow.
  const char* before = std::getenv("BRIGADE_CPU_ISA");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  REQUIRE(unsetenv("BRIGADE_CPU_ISA") == 0);
  CHECK(cpu::kernel_isa() == cpu::detected_isa());
  REQUIRE(setenv("BRIGADE_CPU_ISA", "portable", 1) == 0);
  CHECK(cpu::kernel_isa() == cpu::Isa::portable);
  {
    ForcedIsa forced(cpu::Isa::portable);  // forcing wins over the environment too
    CHECK(cpu::kernel_isa() == cpu::Isa::portable);
  }
  REQUIRE(setenv("BRIGADE_CPU_ISA", "avx2", 1) == 0);
  CHECK_THROWS_WITH_AS(cpu::kernel_isa(),
                       doctest::Contains("BRIGADE_CPU_ISA=avx2 is not an instruction set"), Error);
  REQUIRE(setenv("BRIGADE_CPU_ISA", "avx512", 1) == 0);
  if (cpu::detected_isa() == cpu::Isa::avx512)
    CHECK(cpu::kernel_isa() == cpu::Isa::avx512);
  else
    CHECK_THROWS_WITH_AS(cpu::kernel_isa(), doctest::Contains("lacks AVX-512F"), Error);
  const int restored =
      saved ? setenv("BRIGADE_CPU_ISA", saved->c_str(), 1) : unsetenv("BRIGADE_CPU_ISA");
  REQUIRE(restored == 0);
}

TEST_CASE("conv2d: im2col then col2im multiplies each pixel by the number of taps that read it") {
  // Ones through im2col and back: pixel (h, w) receives one per (output, tap) pair reading it,
  // which the reference backward-data with all-ones dy and w (K = 1, C = 1) counts too.
  const Conv2dShape s = make_conv2d_shape(1, 1, 7, 6, 1, 3, 2, 2, Padding::same);
  std::vector<float> x(s.x_size(), 1.0f), col(s.C * s.R * s.S * s.P * s.Q), back(s.x_size());
  cpu::im2col(x.data(), col.data(), s);
  cpu::col2im(col.data(), back.data(), s);
  std::vector<double> ones_y(s.y_size(), 1.0), ones_w(s.w_size(), 1.0), count(s.x_size());
  ref::conv2d_backward_data(ones_y.data(), ones_w.data(), count.data(), s);
  CHECK(all_close("col2im(im2col(1))", back.data(), count, 0.0));
}

TEST_CASE("conv2d: the reference backward matches finite differences (double)") {
  const Case cases[] = {{2, 2, 5, 6, 3, 3, 2, 2, Padding::same},
                        {1, 3, 4, 4, 2, 3, 3, 1, Padding::valid}};
  for (const Case& c : cases) {
    const Conv2dShape s = make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    auto x = random_vector(s.x_size(), 11), w = random_vector(s.w_size(), 12);
    auto b = random_vector(s.K, 13);
    const auto G = random_vector(s.y_size(), 14);  // L = <y, G>, so dL/dy = G
    auto loss = [&] {
      std::vector<double> y(s.y_size());
      ref::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s);
      return dot(y, G);
    };
    std::vector<double> dx(s.x_size()), dw(s.w_size(), 0.0), db(s.K, 0.0);
    ref::conv2d_backward_data(G.data(), w.data(), dx.data(), s);
    ref::conv2d_backward_filter(x.data(), G.data(), dw.data(), s);
    ref::conv2d_backward_bias(G.data(), db.data(), s);
    CHECK(gradient_matches("x", x, dx, loss));
    CHECK(gradient_matches("w", w, dw, loss));
    CHECK(gradient_matches("b", b, db, loss));
  }
}

TEST_CASE("conv2d: Winograd takes the question's conv2d_2 and conv2d_3, not conv2d_1 or conv2d_4") {
  // forward, and backward-data through the forward that computes it
  auto takes = [](const Conv2dShape& s) {
    using namespace cpu::winograd;
    return std::pair{applies(s), applies(data_shape(s))};
  };
  CHECK(takes(make_conv2d_shape(128, 1, 28, 28, 32, 3, 3, 1, Padding::valid)) ==
        std::pair{false, false});  // one input channel: the direct forward; dx is never needed
  CHECK(takes(make_conv2d_shape(128, 32, 26, 26, 64, 3, 3, 1, Padding::valid)) ==
        std::pair{true, true});
  CHECK(takes(make_conv2d_shape(128, 64, 12, 12, 128, 3, 3, 1, Padding::valid)) ==
        std::pair{true, true});
  // 3x3 outputs fill 9 of the 16 cells of their tiles, its 5x5 dx 25 of 36
  CHECK(takes(make_conv2d_shape(128, 128, 5, 5, 64, 3, 3, 1, Padding::valid)) ==
        std::pair{false, false});
  CHECK_FALSE(cpu::winograd::applies(make_conv2d_shape(2, 8, 9, 9, 8, 3, 3, 2, Padding::same)));
  CHECK_FALSE(cpu::winograd::applies(make_conv2d_shape(2, 8, 9, 9, 8, 5, 5, 1, Padding::same)));
  // the backward-data shape is a forward convolution from dy's size back to x's
  const Conv2dShape s = make_conv2d_shape(2, 6, 9, 37, 5, 3, 3, 1, Padding::same);
  const Conv2dShape d = cpu::winograd::data_shape(s);
  CHECK(d.C == s.K);
  CHECK(d.K == s.C);
  CHECK(d.H == s.P);
  CHECK(d.W == s.Q);
  CHECK(d.P == s.H);
  CHECK(d.Q == s.W);
  CHECK(d.pad_h == 2 - s.pad_h);
  CHECK(d.pad_w == 2 - s.pad_w);
}

TEST_CASE("conv2d shapes: valid and same output sizes, TensorFlow's padding split, clear errors") {
  const Conv2dShape v = make_conv2d_shape(8, 1, 28, 28, 32, 3, 3, 1, Padding::valid);
  CHECK(v.P == 26);
  CHECK(v.Q == 26);
  CHECK(v.pad_h == 0);
  // same, stride 2 on 7: P = ceil(7/2) = 4; total padding (4-1)·2 + 3 - 7 = 2, 1 on top
  const Conv2dShape s2 = make_conv2d_shape(1, 1, 7, 7, 1, 3, 3, 2, Padding::same);
  CHECK(s2.P == 4);
  CHECK(s2.pad_h == 1);
  // same, even window 4 on 6, stride 1: total 3, top 1 (the smaller half), bottom 2
  const Conv2dShape s3 = make_conv2d_shape(1, 1, 6, 6, 1, 4, 4, 1, Padding::same);
  CHECK(s3.P == 6);
  CHECK(s3.pad_h == 1);
  CHECK_THROWS_WITH_AS(make_conv2d_shape(1, 1, 2, 2, 4, 3, 3, 1, Padding::valid),
                       doctest::Contains("3x3 kernel does not fit the input (1, 1, 2, 2)"),
                       std::invalid_argument);
  CHECK_THROWS_AS(make_conv2d_shape(1, 1, 5, 5, 4, 3, 3, 0, Padding::valid), std::invalid_argument);
}

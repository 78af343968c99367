// Math mode tf32 on the vendor path (kernels/math_mode.h) over the emulated cuBLAS and cuDNN:
// a GEMM and the three convolution passes read their inputs rounded to TF32 and accumulate in
// FP32, as tensor cores do, so they equal a double reference over inputs rounded by
// round_to_tf32 (and differ from the FP32 one), and fp32 mode is left as it was, bit for bit.
// Emulated builds only (tests/kernels/emu/vendor/meson.build).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/vendor.h"
#include "kernels/math_mode.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/tf32.h"
#include "tests/kernels/cpu/check.h"
#include "tests/support/deadline.h"

using namespace brigade;

namespace {

// The process's math mode for one test, fp32 again after it (whatever the test did).
struct MathModeFor {
  explicit MathModeFor(MathMode m) { set_math_mode(m); }
  ~MathModeFor() { set_math_mode(MathMode::fp32); }
};

// A float array on the stream's GPU.
Tensor on_gpu(const std::vector<float>& host, const Stream& stream) {
  return Tensor::from_vector(host, Shape({static_cast<int64_t>(host.size())}), stream);
}

// The values a tensor core reads, in double for the references.
std::vector<double> tf32_of(const std::vector<float>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ref::round_to_tf32(v[i]);
  return out;
}

// Row-major C (M, N) = A (M, K) · B (K, N) in double.
std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, int64_t M,
                            int64_t N, int64_t K) {
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t l = 0; l < K; ++l) c[i * N + j] += a[i * K + l] * b[l * N + j];
  return c;
}

// C = A · B through Brigade's cuBLAS path in the process's math mode.
std::vector<float> vendor_gemm(const std::vector<float>& a, const std::vector<float>& b,
                               int64_t M, int64_t N, int64_t K, const Stream& stream) {
  const Tensor da = on_gpu(a, stream), db = on_gpu(b, stream);
  const Tensor dc = on_gpu(std::vector<float>(static_cast<size_t>(M * N), NAN), stream);
  cuda::vendor::sgemm(false, false, M, N, K, 1.0f, da.data<float>(), K, db.data<float>(), N,
                      0.0f, dc.data<float>(), N, stream);
  return dc.to_vector();
}

}  // namespace

TEST_CASE("round_to_tf32 keeps 10 mantissa bits, to nearest, ties away from zero") {
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);  // TF32's step at 1
  CHECK(ref::round_to_tf32(one + std::ldexp(1.0f, -12)) == one);         // a quarter step: down
  CHECK(ref::round_to_tf32(one + std::ldexp(1.0f, -11)) == one + ulp);   // a tie: away from 0
  CHECK(ref::round_to_tf32(-(one + std::ldexp(1.0f, -11))) == -(one + ulp));
  CHECK(ref::round_to_tf32(one + 3 * std::ldexp(1.0f, -12)) == one + ulp);  // three quarters: up
  CHECK(ref::round_to_tf32(one + ulp) == one + ulp);                     // TF32 already: kept
  CHECK(ref::round_to_tf32(2.0f - std::ldexp(1.0f, -12)) == 2.0f);       // a carry: next binade
  // The largest float is past the largest TF32 by more than half a step: infinity.
  CHECK(ref::round_to_tf32(std::numeric_limits<float>::max()) ==
        std::numeric_limits<float>::infinity());
  CHECK(std::isnan(ref::round_to_tf32(NAN)));
  CHECK(ref::round_to_tf32(-INFINITY) == -INFINITY);
}

TEST_CASE("cuBLAS SGEMM in tf32 equals the product of TF32-rounded inputs; fp32 is untouched") {
  testing::Deadline deadline("cuBLAS in tf32");
  const Stream stream = Stream::create(Device::cuda(0));

  SUBCASE("a hand-worked product: 8 terms of (1 + 2^-12) · 1") {
    // FP32 holds 1 + 2^-12 exactly, and the sum 8 + 2^-9 too; TF32 reads 1 (a quarter step
    // below its half), so the sum is 8: exact in both, so the bits must be these.
    const std::vector<float> a(8, 1.0f + std::ldexp(1.0f, -12)), b(8, 1.0f);
    const std::vector<float> fp32_before = vendor_gemm(a, b, 1, 1, 8, stream);
    {
      const MathModeFor tf32(MathMode::tf32);
      CHECK(vendor_gemm(a, b, 1, 1, 8, stream) == std::vector<float>{8.0f});
    }
    CHECK(fp32_before == std::vector<float>{8.0f + std::ldexp(1.0f, -9)});
    CHECK(vendor_gemm(a, b, 1, 1, 8, stream) == fp32_before);  // fp32 again: the fp32 handles
  }

  SUBCASE("random operands") {
    const int64_t M = 9, N = 7, K = 64;
    const std::vector<float> a = test::to_float(test::random_vector(M * K, 31)),
                             b = test::to_float(test::random_vector(K * N, 32));
    const std::vector<float> fp32_before = vendor_gemm(a, b, M, N, K, stream);
    std::vector<float> got;
    {
      const MathModeFor tf32(MathMode::tf32);
      got = vendor_gemm(a, b, M, N, K, stream);
    }
    // A product of two TF32 values (11 significant bits each) is exact in FP32: the only error
    // left is the FP32 sum of K terms, which sum_tolerance bounds.
    const std::vector<double> tol =
        test::sum_tolerance(product(test::abs_of(tf32_of(a)), test::abs_of(tf32_of(b)), M, N, K), K);
    CHECK(test::all_close("tf32 C", got.data(), product(tf32_of(a), tf32_of(b), M, N, K), tol));
    // Each input is off by up to 2^-11 relative in TF32: far beyond that tolerance.
    const std::vector<double> fp32_want =
        product(test::to_double(a), test::to_double(b), M, N, K);
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::fabs(got[i] - fp32_want[i]) > tol[i];
    CHECK(differ > static_cast<int64_t>(got.size()) / 2);
    CHECK(test::all_close("fp32 C", fp32_before.data(), fp32_want, tol));
    CHECK(test::same_bits(vendor_gemm(a, b, M, N, K, stream), fp32_before));
  }
}

TEST_CASE("cuDNN convolution passes in tf32 equal the reference over TF32-rounded inputs") {
  testing::Deadline deadline("cuDNN in tf32");
  const Stream stream = Stream::create(Device::cuda(0));

  SUBCASE("a hand-worked forward: a 3x3 window of (1 + 2^-12) · 1") {
    const Conv2dShape s = make_conv2d_shape(1, 1, 3, 3, 1, 3, 3, 1, Padding::valid);
    const Tensor x = on_gpu(std::vector<float>(9, 1.0f + std::ldexp(1.0f, -12)), stream),
                 w = on_gpu(std::vector<float>(9, 1.0f), stream), y = on_gpu({NAN}, stream);
    auto forward = [&] {
      const size_t bytes = cuda::vendor::conv2d_workspace_bytes(s, stream);
      const Tensor ws = on_gpu(std::vector<float>(bytes / sizeof(float) + 1), stream);
      cuda::vendor::conv2d_forward(x.data<float>(), w.data<float>(), nullptr, y.data<float>(), s,
                                   ws.data<float>(), bytes, stream);
      return y.to_vector();
    };
    const std::vector<float> fp32 = forward();
    {
      const MathModeFor tf32(MathMode::tf32);
      CHECK(forward() == std::vector<float>{9.0f});
    }
    CHECK(fp32 == std::vector<float>{9.0f + 9.0f * std::ldexp(1.0f, -12)});
    CHECK(forward() == fp32);
  }

  SUBCASE("random operands: forward with bias and ReLU, backward-data, backward-filter") {
    const Conv2dShape s = make_conv2d_shape(2, 3, 7, 7, 4, 3, 3, 1, Padding::valid);
    const std::vector<float> x = test::to_float(test::random_vector(s.x_size(), 41)),
                             w = test::to_float(test::random_vector(s.w_size(), 42)),
                             b = test::to_float(test::random_vector(s.K, 43)),
                             dy = test::to_float(test::random_vector(s.y_size(), 44));
    const Tensor dx_in = on_gpu(x, stream), dw_in = on_gpu(w, stream), db = on_gpu(b, stream),
                 ddy = on_gpu(dy, stream);
    const Tensor y = on_gpu(std::vector<float>(s.y_size(), NAN), stream),
                 dx = on_gpu(std::vector<float>(s.x_size(), NAN), stream),
                 dw = on_gpu(std::vector<float>(s.w_size(), 0.0f), stream);
    {
      const MathModeFor tf32(MathMode::tf32);
      const size_t bytes = cuda::vendor::conv2d_workspace_bytes(s, stream);
      const Tensor ws = on_gpu(std::vector<float>(bytes / sizeof(float) + 1), stream);
      cuda::vendor::conv2d_forward(dx_in.data<float>(), dw_in.data<float>(), db.data<float>(),
                                   y.data<float>(), s, ws.data<float>(), bytes, stream, /*relu=*/true);
      cuda::vendor::conv2d_backward_data(ddy.data<float>(), dw_in.data<float>(), dx.data<float>(),
                                         s, ws.data<float>(), bytes, stream);
      cuda::vendor::conv2d_backward_filter(dx_in.data<float>(), ddy.data<float>(),
                                           dw.data<float>(), s, ws.data<float>(), bytes, stream);
    }
    // The references in double over the TF32 values; each output is a sum of L products
    // (exact in FP32, as for the GEMM) and the bias, within sum_tolerance of the sum's terms.
    const std::vector<double> tx = tf32_of(x), tw = tf32_of(w), tdy = tf32_of(dy);
    std::vector<double> y_want(s.y_size()), y_mag(s.y_size()), dx_want(s.x_size()),
        dx_mag(s.x_size()), dw_want(s.w_size(), 0.0), dw_mag(s.w_size(), 0.0);
    const std::vector<double> bias = test::to_double(b), bias_mag = test::abs_of(bias);
    ref::conv2d_forward<double>(tx.data(), tw.data(), bias.data(), y_want.data(), s);
    ref::conv2d_forward<double>(test::abs_of(tx).data(), test::abs_of(tw).data(), bias_mag.data(),
                                y_mag.data(), s);
    for (double& v : y_want) v = std::max(v, 0.0);
    ref::conv2d_backward_data<double>(tdy.data(), tw.data(), dx_want.data(), s);
    ref::conv2d_backward_data<double>(test::abs_of(tdy).data(), test::abs_of(tw).data(),
                                      dx_mag.data(), s);
    ref::conv2d_backward_filter<double>(tx.data(), tdy.data(), dw_want.data(), s);
    ref::conv2d_backward_filter<double>(test::abs_of(tx).data(), test::abs_of(tdy).data(),
                                        dw_mag.data(), s);
    const std::vector<float> y_got = y.to_vector(), dx_got = dx.to_vector(),
                             dw_got = dw.to_vector();
    CHECK(test::all_close("tf32 y", y_got.data(), y_want,
                          test::sum_tolerance(y_mag, s.C * s.R * s.S + 1)));
    CHECK(test::all_close("tf32 dx", dx_got.data(), dx_want,
                          test::sum_tolerance(dx_mag, s.K * s.R * s.S)));
    const std::vector<double> dw_tol = test::sum_tolerance(dw_mag, s.N * s.P * s.Q);
    CHECK(test::all_close("tf32 dw", dw_got.data(), dw_want, dw_tol));
    // And not the FP32 filter gradient: TF32's rounding is far beyond that tolerance.
    std::vector<double> dw_fp32(s.w_size(), 0.0);
    ref::conv2d_backward_filter<double>(test::to_double(x).data(), test::to_double(dy).data(),
                                        dw_fp32.data(), s);
    int64_t differ = 0;
    for (size_t i = 0; i < dw_got.size(); ++i)
      differ += std::fabs(dw_got[i] - dw_fp32[i]) > dw_tol[i];
    CHECK(differ > static_cast<int64_t>(dw_got.size()) / 2);
  }
}

// cuDNN lists (algorithm, math) pairs, and a pass computes in the math of the convolution
// descriptor it is given: Brigade runs each pair on a descriptor of the pair's math, so a pair
// listed with FMA math computes in FP32 even in tf32 mode, as the log names it. Hand-worked, on
// two samples of a 3x3 window of (1 + 2^-12) and a 3x3 filter of ones: in FP32 y = 9 + 9 · 2^-12
// and dw = 2 + 2^-11 (dy = 1), dx = 1 + 2^-12 (dy = 1 + 2^-12, w = 1); through TF32, 9, 2 and 1.
// The emulated heuristics rank the FMA pair first on one GPU (BRIGADE_EMU_CUDNN_FMA_FIRST=1),
// the tensor-op pair first on another (the choice is kept per GPU and shape).
TEST_CASE("cuDNN's (algorithm, math) pairs run in their own math, whichever is ranked first") {
  testing::Deadline deadline("cuDNN pairs");
  const Conv2dShape s = make_conv2d_shape(2, 1, 3, 3, 1, 3, 3, 1, Padding::valid);
  const float e = std::ldexp(1.0f, -12);
  const MathModeFor tf32(MathMode::tf32);
  struct Passes {
    std::vector<float> y, dx, dw;
  };
  auto passes = [&](int gpu) {
    const Stream stream = Stream::create(Device::cuda(gpu));
    const Tensor x = on_gpu(std::vector<float>(18, 1.0f + e), stream),
                 w = on_gpu(std::vector<float>(9, 1.0f), stream),
                 y = on_gpu({NAN, NAN}, stream), dy_data = on_gpu({1.0f + e, 1.0f + e}, stream),
                 dy_filter = on_gpu({1.0f, 1.0f}, stream),
                 dx = on_gpu(std::vector<float>(18, NAN), stream),
                 dw = on_gpu(std::vector<float>(9, 0.0f), stream);
    const size_t bytes = cuda::vendor::conv2d_workspace_bytes(s, stream);
    const Tensor ws = on_gpu(std::vector<float>(bytes / sizeof(float) + 1), stream);
    cuda::vendor::conv2d_forward(x.data<float>(), w.data<float>(), nullptr, y.data<float>(), s,
                                 ws.data<float>(), bytes, stream);
    cuda::vendor::conv2d_backward_data(dy_data.data<float>(), w.data<float>(), dx.data<float>(),
                                       s, ws.data<float>(), bytes, stream);
    cuda::vendor::conv2d_backward_filter(x.data<float>(), dy_filter.data<float>(),
                                         dw.data<float>(), s, ws.data<float>(), bytes, stream);
    return Passes{y.to_vector(), dx.to_vector(), dw.to_vector()};
  };
  REQUIRE(setenv("BRIGADE_EMU_CUDNN_FMA_FIRST", "1", 1) == 0);
  const Passes fma = passes(1);
  REQUIRE(unsetenv("BRIGADE_EMU_CUDNN_FMA_FIRST") == 0);
  CHECK(fma.y == std::vector<float>(2, 9.0f + 9.0f * e));
  CHECK(fma.dx == std::vector<float>(18, 1.0f + e));
  CHECK(fma.dw == std::vector<float>(9, 2.0f + 2.0f * e));
  const Passes tensor_op = passes(2);
  CHECK(tensor_op.y == std::vector<float>(2, 9.0f));
  CHECK(tensor_op.dx == std::vector<float>(18, 1.0f));
  CHECK(tensor_op.dw == std::vector<float>(9, 2.0f));
}

// Precision bf16 (kernels/precision.h) through kernels/ops.h on a GPU (real or emulated; the
// cases say so and return when there is none): on the hand-written path Dense and Conv2D, each
// pass, against brigade::ref in double on the same operands rounded by ref::round_to_bf16
// (within the float-sum tolerance of tests/kernels/cpu/check.h, which fp32 operands miss by
// orders of magnitude), the bf16 value ops bit for bit with the CPU's, and the vendor path's
// refusal by name.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/cuda/path.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "kernels/reference/bf16.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/ops/wave.h"
#include "tests/support/error_text.h"

namespace brigade::ops {
namespace {

// The process's precision and CUDA path for one test, as they were after it.
struct Bf16On {
  CudaPath before = cuda_path();
  explicit Bf16On(CudaPath p) {
    set_cuda_path(p);
    set_precision(Precision::bf16);
  }
  ~Bf16On() {
    set_precision(Precision::fp32);
    set_cuda_path(before);
  }
};

using brigade::testing::wave;
using test::abs_of;
using test::all_close;
using test::sum_tolerance;

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A reference result `ref_of(operands...)` on the bf16-rounded operands, checked against `got`
// with the tolerance of a float sum of L terms (the magnitudes: the reference on |operands|).
template <class Ref>
bool matches_bf16_reference(const char* what, const std::vector<float>& got,
                            const std::vector<float>& a, const std::vector<float>& b, int64_t L,
                            Ref ref_of) {
  std::vector<double> want(got.size(), 0.0), magnitude(got.size(), 0.0);
  const std::vector<double> ra = ref::bf16_operands(a), rb = ref::bf16_operands(b);
  ref_of(ra, rb, want);
  const std::vector<double> ma = abs_of(ra), mb = abs_of(rb);
  ref_of(ma, mb, magnitude);
  return all_close(what, got.data(), want, sum_tolerance(magnitude, L));
}

}  // namespace

TEST_CASE("precision bf16 on a GPU: Dense's three products on bf16 operands, float sums") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  const Stream g = Stream::default_for(Device::cuda(0));
  const int64_t N = 5, in = 37, out = 11;
  const auto xv = wave(N * in, 0.37f), wv = wave(out * in, 0.11f), dyv = wave(N * out, 0.53f);
  const Tensor x = Tensor::from_vector(xv, Shape({N, in}), g);
  const Tensor w = Tensor::from_vector(wv, Shape({out, in}), g);
  const Tensor b = Tensor::zeros(Shape({out}), g);
  const Tensor dy = Tensor::from_vector(dyv, Shape({N, out}), g);
  const Tensor dw = Tensor::zeros(Shape({out, in}), g), db = Tensor::zeros(Shape({out}), g);
  Bf16On bf16(CudaPath::handwritten);
  const std::vector<float> y = dense_forward(x, w, b, false, g).to_vector();
  const std::vector<float> dx = dense_backward_data(dy, w, g).to_vector();
  dense_backward_params(x, dy, dw, db, g);
  CHECK(matches_bf16_reference("y", y, xv, wv, in, [&](auto& X, auto& W, auto& Y) {
    ref::dense_forward<double>(X.data(), W.data(), nullptr, Y.data(), N, in, out);
  }));
  CHECK(matches_bf16_reference("dx", dx, dyv, wv, out, [&](auto& DY, auto& W, auto& DX) {
    ref::dense_backward_data<double>(DY.data(), W.data(), DX.data(), N, in, out);
  }));
  CHECK(matches_bf16_reference("dw", dw.to_vector(), xv, dyv, N, [&](auto& X, auto& DY, auto& DW) {
    ref::dense_backward_weight<double>(X.data(), DY.data(), DW.data(), N, in, out);
  }));
  // The bias gradient sums the float dy, unrounded (kernels/cpu/dense_bf16.h's rule).
  std::vector<double> db_want(out, 0.0);
  ref::dense_backward_bias<double>(as_double(dyv).data(), db_want.data(), N, out);
  CHECK(all_close("db", db.to_vector().data(), db_want, 1e-6));
}

TEST_CASE("precision bf16 on a GPU: Conv2D's three products on bf16 operands, float sums") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  const Stream g = Stream::default_for(Device::cuda(0));
  const Conv2dShape s = make_conv2d_shape(2, 4, 6, 6, 5, 3, 3, 1, Padding::same);
  const Shape x_shape({s.N, s.C, s.H, s.W}), w_shape({s.K, s.C, s.R, s.S});
  const auto xv = wave(x_shape.numel(), 0.23f), wv = wave(w_shape.numel(), 0.7f),
             dyv = wave(s.N * s.K * s.P * s.Q, 0.41f);
  const Tensor x = Tensor::from_vector(xv, x_shape, g), w = Tensor::from_vector(wv, w_shape, g);
  const Tensor b = Tensor::zeros(Shape({s.K}), g);
  const Tensor dy = Tensor::from_vector(dyv, Shape({s.N, s.K, s.P, s.Q}), g);
  const Tensor dw = Tensor::zeros(w_shape, g), db = Tensor::zeros(Shape({s.K}), g);
  Bf16On bf16(CudaPath::handwritten);
  const std::vector<float> y = conv2d_forward(x, w, b, {1, Padding::same}, false, g).to_vector();
  const std::vector<float> dx =
      conv2d_backward_data(dy, w, x_shape, {1, Padding::same}, g).to_vector();
  conv2d_backward_params(x, dy, dw, db, {1, Padding::same}, g);
  const int64_t taps = s.C * s.R * s.S;
  CHECK(matches_bf16_reference("y", y, xv, wv, taps, [&](auto& X, auto& W, auto& Y) {
    ref::conv2d_forward<double>(X.data(), W.data(), nullptr, Y.data(), s);
  }));
  const int64_t fan_out = s.K * s.R * s.S;
  CHECK(matches_bf16_reference("dx", dx, dyv, wv, fan_out, [&](auto& DY, auto& W, auto& DX) {
    ref::conv2d_backward_data<double>(DY.data(), W.data(), DX.data(), s);
  }));
  CHECK(matches_bf16_reference("dw", dw.to_vector(), xv, dyv, s.N * s.P * s.Q,
                               [&](auto& X, auto& DY, auto& DW) {
                                 ref::conv2d_backward_filter<double>(X.data(), DY.data(),
                                                                     DW.data(), s);
                               }));
}

TEST_CASE("precision bf16 on a GPU: the value ops give the CPU's bits; the vendor path refuses") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  const Stream g = Stream::default_for(Device::cuda(0)), c = Stream::default_for(Device::cpu(0));
  std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 0x1p-133f, INFINITY};
  for (float v : wave(5000, 0.37f)) values.push_back(v * 1e-38f);  // denormals and normals
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor xg = Tensor::from_vector(values, Shape({n}), g);
  const Tensor xc = Tensor::from_vector(values, Shape({n}), c);
  const Tensor rounded = Tensor::empty(Shape({n}), g);
  round_to_bf16(xg, rounded, g);
  const Tensor narrow = narrow_to_bf16(xg, g);
  CHECK(narrow.dtype() == DType::bfloat16);
  const Tensor cpu_rounded = Tensor::empty(Shape({n}), c);
  round_to_bf16(xc, cpu_rounded, c);
  const std::vector<float> want = cpu_rounded.to_vector();
  CHECK(test::same_bits(rounded.to_vector(), want));
  CHECK(test::same_bits(widen_to_float32(narrow, g).to_vector(), want));

  const Tensor w = Tensor::zeros(Shape({3, 8}), g), b = Tensor::zeros(Shape({3}), g);
  const Tensor x = Tensor::zeros(Shape({2, 8}), g);
  Bf16On bf16(CudaPath::vendor);
  CHECK(testing::error_text<Error>([&] { dense_forward(x, w, b, false, g); }) ==
        "dense_forward: " + precision_refusal(Precision::bf16, true, "cuda:0", "vendor"));
}

}  // namespace brigade::ops

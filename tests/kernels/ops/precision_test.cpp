// Precision bf16 (kernels/precision.h) through kernels/ops.h: a CPU device's Dense and Conv2D
// compute in bf16 (the bits of kernels/cpu's bf16 kernels, which tests/kernels/cpu checks
// against the reference), fp32 is left as it was (a CUDA device's two paths:
// precision_gpu_test.cpp), and a bfloat16 tensor is refused by every op rather than read as
// floats, except
// the ops that round to bf16 values and narrow to and widen from bfloat16.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/conv2d/bf16.h"
#include "kernels/cpu/dense_bf16.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "tests/kernels/ops/wave.h"
#include "tests/support/error_text.h"
#include "tests/support/precision_for.h"

namespace brigade::ops {
namespace {

using brigade::testing::PrecisionFor;

using brigade::testing::wave;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("precision: parsed and named") {
  CHECK(parse_precision("fp32") == Precision::fp32);
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK(std::string(precision_name(Precision::bf16)) == "bf16");
  CHECK(testing::error_text<std::invalid_argument>([] { parse_precision("fp16"); }) ==
        "invalid precision \"fp16\": expected \"fp32\" or \"bf16\"");
}

TEST_CASE("precision bf16: Dense and Conv2D on a CPU device run the bf16 kernels, fp32 unchanged") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const int64_t N = 5, in = 37, out = 11;
  const auto xv = wave(N * in, 0.37f), wv = wave(out * in, 0.11f), bv = wave(out, 0.5f);
  const Tensor x = Tensor::from_vector(xv, Shape({N, in}), s);
  const Tensor w = Tensor::from_vector(wv, Shape({out, in}), s);
  const Tensor b = Tensor::from_vector(bv, Shape({out}), s);
  const std::vector<float> fp32_before = dense_forward(x, w, b, true, s).to_vector();

  std::vector<float> want(static_cast<size_t>(N * out));
  ThreadPool pool(1);
  cpu::dense_forward_bf16(xv.data(), wv.data(), bv.data(), want.data(), N, in, out, pool, true);
  {
    PrecisionFor bf16(Precision::bf16);
    const std::vector<float> got = dense_forward(x, w, b, true, s).to_vector();
    CHECK(same_bits(got, want));
    CHECK(!same_bits(got, fp32_before));  // bf16 did round something
  }
  CHECK(same_bits(dense_forward(x, w, b, true, s).to_vector(), fp32_before));

  // Conv2D: a 3x3 stride-1 shape that fp32 computes by Winograd, bf16 by im2col.
  const Conv2dShape cs = make_conv2d_shape(2, 4, 6, 6, 5, 3, 3, 1, Padding::same);
  const auto iv = wave(2 * 4 * 6 * 6, 0.23f), kv = wave(5 * 4 * 9, 0.7f), kbv = wave(5, 0.3f);
  const Tensor img = Tensor::from_vector(iv, Shape({2, 4, 6, 6}), s);
  const Tensor k = Tensor::from_vector(kv, Shape({5, 4, 3, 3}), s);
  const Tensor kb = Tensor::from_vector(kbv, Shape({5}), s);
  std::vector<float> conv_want(static_cast<size_t>(2 * 5 * 6 * 6));
  cpu::conv2d_forward_bf16(iv.data(), kv.data(), kbv.data(), conv_want.data(), cs, pool, nullptr);
  PrecisionFor bf16(Precision::bf16);
  CHECK(same_bits(conv2d_forward(img, k, kb, {1, Padding::same}, false, s).to_vector(),
                  conv_want));
}

TEST_CASE("a bfloat16 tensor: two bytes an element, refused by an op by name") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const Tensor h = Tensor::empty(Shape({2, 8}), s, DType::bfloat16);
  CHECK(h.nbytes() == 32);
  CHECK(h.str() == "bfloat16 (2, 8) on cpu:0");
  const Tensor w = Tensor::zeros(Shape({3, 8}), s), b = Tensor::zeros(Shape({3}), s);
  // A GEMM operand (Dense's x or dy, as ops::dense_operand makes it) may be bfloat16 in
  // precision bf16 on a GPU only; the bias never.
  CHECK(testing::error_text<Error>([&] { dense_forward(h, w, b, false, s); }) ==
        "dense_forward: x bfloat16 (2, 8) on cpu:0 in bfloat16 storage is for precision bf16 on "
        "a GPU; here the precision is fp32 on cpu:0");
  CHECK(testing::error_text<Error>([&] { dense_forward(w, w, h, false, s); }) ==
        "dense_forward: b bfloat16 (2, 8) on cpu:0 is not float32, the only element type its "
        "kernels take");
  CHECK(testing::error_text<Error>([&] { relu_forward(h, s); }).find("not float32") !=
        std::string::npos);
  CHECK(testing::error_text<Error>([&] { h.data<float>(); }) ==
        "data<float32>() of a bfloat16 (2, 8) on cpu:0");
}

TEST_CASE("bf16 values: rounded in place, narrowed to bfloat16 and widened back, bit for bit") {
  const Stream s = Stream::default_for(Device::cpu(0));
  // A tie to even (1 + 2^-8 -> 1), a tie to odd's neighbour (1 + 3·2^-8 -> 1 + 2^-6), a
  // denormal, a NaN, an infinity, -0, and a wave of ordinary values: every one rounded as the
  // scalar to_bf16 (kernels/cpu/bf16.h, tested against its own cases) rounds it.
  std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f,
                               cpu::float_from_bits(0x00018000u), std::nanf(""), INFINITY};
  for (float v : wave(100000, 0.37f)) values.push_back(v);
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> expected;
  for (float v : values) expected.push_back(cpu::to_float(cpu::to_bf16(v)));
  CHECK(expected[0] == 1.0f);
  CHECK(expected[1] == 1.0f + 0x1p-6f);

  const Tensor x = Tensor::from_vector(values, Shape({n}), s);
  const Tensor narrow = narrow_to_bf16(x, s);
  CHECK(narrow.dtype() == DType::bfloat16);
  CHECK(narrow.nbytes() * 2 == x.nbytes());
  CHECK(same_bits(widen_to_float32(narrow, s).to_vector(), expected));
  round_to_bf16(x, x, s);  // in place
  CHECK(same_bits(x.to_vector(), expected));
  // bf16 values survive the narrowing exactly.
  CHECK(same_bits(widen_to_float32(narrow_to_bf16(x, s), s).to_vector(), expected));

  CHECK(testing::error_text<Error>([&] { widen_to_float32(x, s); }) ==
        "widen_to_float32: x float32 (" + std::to_string(n) + ") on cpu:0 is not a bfloat16 tensor");
  CHECK(testing::error_text<Error>([&] { round_to_bf16(narrow, x, s); }).find("not float32") !=
        std::string::npos);
}

// Tensor::holds_bf16_values: what rounding would leave as it is is said by the op that wrote
// it, and precision bf16 rounds it no more (layers/bf16_boundary.h). Every mark is checked
// against the values: a marked tensor whose bits rounding would change is a wrong mark.
TEST_CASE("bf16 values: the ops that write them say so, the ops that select them keep it") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const std::vector<float> values = wave(4 * 2 * 4 * 4, 0.61f);  // not bf16 values
  const Tensor x = Tensor::from_vector(values, Shape({4, 2, 4, 4}), s);
  const auto rounds_to_itself = [](const Tensor& t) {
    const std::vector<float> v = t.to_vector();
    std::vector<float> r;
    for (float e : v) r.push_back(cpu::to_float(cpu::to_bf16(e)));
    return same_bits(v, r);
  };
  CHECK_FALSE(x.holds_bf16_values());
  REQUIRE_FALSE(rounds_to_itself(x));

  const Tensor rounded = round_to_bf16(x, Tensor::empty(x.shape(), s), s);
  CHECK(rounded.holds_bf16_values());
  CHECK(rounds_to_itself(rounded));
  CHECK_FALSE(x.holds_bf16_values());  // the source is what it was
  CHECK(rounded.reshape(Shape({4, 32})).holds_bf16_values());  // a view: the same values
  const Tensor widened = widen_to_float32(narrow_to_bf16(x, s), s);
  CHECK(widened.holds_bf16_values());
  CHECK(rounds_to_itself(widened));

  // Selections of bf16 values: a ReLU forward and backward, a max-pool's forward (CPU).
  const Tensor relu_y = relu_forward(rounded, s);
  CHECK(relu_y.holds_bf16_values());
  CHECK(rounds_to_itself(relu_y));
  const Tensor relu_dx = relu_backward(relu_y, rounded, s);
  CHECK(relu_dx.holds_bf16_values());
  CHECK(rounds_to_itself(relu_dx));
  const PoolResult pooled = maxpool2d_forward(rounded, Pool2dArgs{}, s);
  CHECK(pooled.y.holds_bf16_values());
  CHECK(rounds_to_itself(pooled.y));
  // ... of values that are not: nothing said, nothing to say.
  CHECK_FALSE(relu_forward(x, s).holds_bf16_values());
  CHECK_FALSE(relu_backward(relu_y, x, s).holds_bf16_values());
  CHECK_FALSE(maxpool2d_forward(x, Pool2dArgs{}, s).y.holds_bf16_values());
  // Arithmetic on bf16 values makes new values: a Dropout's scaling of marked values is not
  // marked (nor bf16 values: 4/3 of them).
  const Tensor dropped = dropout_forward(rounded, 0.25f, DropoutKey{1, 0, 0}, 0, s);
  CHECK_FALSE(dropped.holds_bf16_values());
  CHECK_FALSE(rounds_to_itself(dropped));

  CHECK(testing::error_text<Error>([&] { narrow_to_bf16(x, s).marked_bf16_values(); })
            .find("is not a float32 tensor") != std::string::npos);
}

}  // namespace brigade::ops

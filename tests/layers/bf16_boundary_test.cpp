// Precision bf16's layer boundaries (layers/bf16_boundary.h): in a bf16 run every layer's
// output and the gradient of every layer's input are bf16 values — what makes a pipeline's
// cut, anywhere, lossless in bf16 storage. Checked layer by layer on the small model (a tape
// per layer, as a pipeline that cut everywhere would hold), from input and output gradients
// that are not bf16 values; a layer whose output is a view of its input (Flatten) leaves that
// input as it was, and copies nothing when it is given bf16 values; and fp32 runs are left
// alone.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "tests/layers/small_model.h"
#include "tests/support/precision_for.h"

namespace brigade::layers {
namespace {

using brigade::testing::PrecisionFor;

// How many of t's elements are not bf16 values (rounding them to bf16 changes their bits).
int64_t not_bf16(const Tensor& t) {
  int64_t count = 0;
  for (float v : t.to_vector())
    if (cpu::float_bits(cpu::to_float(cpu::to_bf16(v))) != cpu::float_bits(v)) ++count;
  return count;
}

// n floats from a normal distribution: almost none of them bf16 values.
std::vector<float> noise(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(normal(gen));
  return v;
}

// Each layer of the small model on its own tape: the outputs forward, then the input
// gradients backward from an output gradient of noise. Returns the layer boundaries' tensors:
// every output, then every input gradient.
std::vector<Tensor> boundaries(Sequential& model, const Tensor& x) {
  const size_t layers = model.size();
  std::vector<Tape> tapes(layers);
  std::vector<Tensor> out;
  Tensor h = x;
  for (size_t i = 0; i < layers; ++i) {
    ForwardContext ctx;
    ctx.tape = &tapes[i];
    h = model.forward(h, ctx, i, i + 1);
    out.push_back(h);
  }
  Tensor dy = Tensor::from_vector(noise(h.numel(), 5), h.shape());
  for (size_t i = layers; i-- > 0;) {
    dy = tapes[i].backward(dy);
    out.push_back(dy);
  }
  return out;
}

}  // namespace

TEST_CASE("precision bf16: every layer's output and input gradient are bf16 values") {
  const test::Batch batch = test::random_batch(4, 3);
  const Tensor x = test::input_of(batch);
  REQUIRE(not_bf16(x) > 0);
  {
    const PrecisionFor bf16(Precision::bf16);
    auto model = test::small_model(1);
    for (const Tensor& t : boundaries(*model, x)) {
      CAPTURE(t.str());
      CHECK(not_bf16(t) == 0);
    }
    CHECK(x.to_vector() == batch.x);  // the input itself is data, never written
  }
  // fp32: the boundaries are the floats they always were (a Conv2D's output is not bf16).
  auto model = test::small_model(1);
  CHECK(not_bf16(boundaries(*model, x).front()) > 0);
}

TEST_CASE("precision bf16: a layer whose output is a view of its input rounds into a new tensor") {
  auto model = test::small_model(1);
  const Tensor x = Tensor::from_vector(noise(4 * 8, 9), Shape({4, 2, 2, 2}));  // Flatten's input
  const std::vector<float> before = x.to_vector();
  const PrecisionFor bf16(Precision::bf16);
  Tape tape;
  ForwardContext ctx;
  ctx.tape = &tape;
  const Tensor y = model->forward(x, ctx, 3, 4);  // layer 3: Flatten
  CHECK(y.shape() == Shape({4, 8}));
  CHECK(not_bf16(y) == 0);
  CHECK(x.to_vector() == before);
  // Its backward likewise: the output gradient it was given stays as it was.
  const Tensor dy = Tensor::from_vector(noise(4 * 8, 10), Shape({4, 8}));
  const std::vector<float> dy_before = dy.to_vector();
  const Tensor dx = tape.backward(dy);
  CHECK(dx.shape() == x.shape());
  CHECK(not_bf16(dx) == 0);
  CHECK(dy.to_vector() == dy_before);
}

// A result that holds bf16 values already, and says so (Tensor::holds_bf16_values), is not
// rounded again: rounding would write the same bits. Flatten of a previous layer's output is
// then a view, no copy, forward and backward; the values are the rounded ones either way.
TEST_CASE("precision bf16: a layer given bf16 values that only views them copies nothing") {
  auto model = test::small_model(1);
  const Stream s = Stream::default_for(Device::cpu(0));
  const Tensor noisy = Tensor::from_vector(noise(4 * 8, 11), Shape({4, 2, 2, 2}));
  const PrecisionFor bf16(Precision::bf16);
  // Flatten's input as a layer before it gives it: rounded, and marked so.
  const Tensor x = ops::round_to_bf16(noisy, Tensor::empty(noisy.shape(), s), s);
  REQUIRE(x.holds_bf16_values());
  Tape tape;
  ForwardContext ctx;
  ctx.tape = &tape;
  const Tensor y = model->forward(x, ctx, 3, 4);  // layer 3: Flatten
  CHECK(y.storage() == x.storage());
  CHECK(y.holds_bf16_values());
  CHECK(y.to_vector() == x.to_vector());
  const Tensor dy_noisy = Tensor::from_vector(noise(4 * 8, 12), Shape({4, 8}));
  const Tensor dy = ops::round_to_bf16(dy_noisy, Tensor::empty(dy_noisy.shape(), s), s);
  const Tensor dx = tape.backward(dy);
  CHECK(dx.storage() == dy.storage());
  CHECK(dx.holds_bf16_values());
  CHECK(not_bf16(dx) == 0);
}

}  // namespace brigade::layers

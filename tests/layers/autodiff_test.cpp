// Autodiff on the tape: the whole small model's gradients against finite differences of the
// same model written independently in double through kernels/reference; the two backward
// halves in either order and fused; micro-batches against one batch; what is released when;
// no-grad mode; a ReLU's mask handed to the layer after it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/allocator.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "kernels/reference/dropout.h"
#include "kernels/reference/maxpool2d.h"
#include "kernels/reference/relu.h"
#include "kernels/reference/softmax.h"
#include "tests/layers/small_model.h"
#include "tests/support/deadline.h"

namespace brigade::layers::test {
namespace {

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The small model's loss in double, from the reference kernels alone (none of ops, tape or
// modules): the oracle the finite differences are taken of.
struct RefModel {
  std::vector<double> w1, b1, w2, b2;  // (2, 1, 3, 3) (2) (3, 8) (3)
  double loss(const std::vector<double>& x, const Batch& b, uint64_t seed, uint32_t step) const {
    const int64_t N = b.n;
    const Conv2dShape cs = make_conv2d_shape(N, 1, kSide, kSide, 2, 3, 3, 1, Padding::valid);
    std::vector<double> y1(static_cast<size_t>(cs.y_size()));  // (N, 2, 4, 4)
    ref::conv2d_forward(x.data(), w1.data(), b1.data(), y1.data(), cs);
    ref::relu_forward(y1.data(), y1.data(), cs.y_size());
    const Pool2dShape ps = make_pool2d_shape(N, 2, 4, 4, 2, 2, 2, Padding::valid);
    std::vector<double> y2(static_cast<size_t>(ps.y_size()));  // (N, 2, 2, 2)
    std::vector<int32_t> argmax(y2.size());
    ref::maxpool2d_forward(y1.data(), y2.data(), argmax.data(), ps);
    // Dropout is layer 2 of the model: its mask is keyed by that index.
    ref::dropout_forward(y2.data(), y2.data(), N, 8, 0, kRate, DropoutKey{seed, step, 2});
    std::vector<double> logits(static_cast<size_t>(N * kClasses));  // (N, 3)
    ref::dense_forward(y2.data(), w2.data(), b2.data(), logits.data(), N, 8, kClasses);
    std::vector<double> dlogits(logits.size());
    return ref::softmax_cross_entropy(logits.data(), b.labels.data(), dlogits.data(), N, kClasses,
                                      double(N));
  }
};

TEST_CASE("whole-model gradients match central differences of the double reference model") {
  testing::Deadline deadline("gradient check");
  auto m = small_model(5);
  const Batch b = random_batch(3, 17);
  Tape tape;
  ops::LossResult r = forward_loss(*m, b, tape, 0, 3.0f, 11, 3);
  const Tensor dx = tape.backward_input(r.dlogits);
  tape.backward_params(r.dlogits);

  RefModel ref;
  std::vector<Parameter*> ps = m->parameters();
  REQUIRE(ps.size() == 4);
  std::vector<std::vector<double>*> slots = {&ref.w1, &ref.b1, &ref.w2, &ref.b2};
  for (size_t i = 0; i < ps.size(); ++i) *slots[i] = to_double(ps[i]->value.to_vector());
  std::vector<double> x = to_double(b.x);
  CHECK(ops::loss_value(r) == doctest::Approx(ref.loss(x, b, 11, 3)).epsilon(1e-6));

  // Central differences in double: truncation O(h²) ~ 1e-12 and rounding ~ 1e-16 / h ~ 1e-10
  // are far below float32's. The autodiff side is float32: sums of < 100 terms of O(1)
  // values, relative error ~1e-6, so 2e-5 floored at 1 (Caffe's convention) has ample
  // margin yet catches any wrong term (a missing ReLU mask, a transposed weight: O(1e-2)).
  const double h = 1e-6;
  auto check = [&](std::vector<double>& v, const std::vector<float>& grad, const char* what) {
    REQUIRE(grad.size() == v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + h;
      const double up = ref.loss(x, b, 11, 3);
      v[i] = keep - h;
      const double down = ref.loss(x, b, 11, 3);
      v[i] = keep;
      const double fd = (up - down) / (2 * h);
      INFO(what << "[" << i << "]: autodiff " << grad[i] << ", finite difference " << fd);
      CHECK(std::abs(grad[i] - fd) <= 2e-5 * std::max(1.0, std::abs(fd)));
    }
  };
  check(ref.w1, ps[0]->grad.to_vector(), "conv2d_1.weight");
  check(ref.b1, ps[1]->grad.to_vector(), "conv2d_1.bias");
  check(ref.w2, ps[2]->grad.to_vector(), "dense_1.weight");
  check(ref.b2, ps[3]->grad.to_vector(), "dense_1.bias");
  check(x, dx.to_vector(), "input");
}

TEST_CASE("B then W, W then B and the fused backward give bit-identical gradients") {
  testing::Deadline deadline("backward orders");
  auto m = small_model(5);
  const Batch b = random_batch(4, 23);
  auto run = [&](int order) {
    m->zero_grad();
    Tape tape;
    ops::LossResult r = forward_loss(*m, b, tape, 0, 4.0f);
    Tensor dx;
    if (order == 0) {
      dx = tape.backward_input(r.dlogits);
      tape.backward_params(r.dlogits);
    } else if (order == 1) {
      tape.backward_params(r.dlogits);
      dx = tape.backward_input(r.dlogits);
    } else {
      dx = tape.backward(r.dlogits);
    }
    CHECK(tape.live_nodes() == 0);
    auto g = grads_of(*m);
    g.push_back(dx.to_vector());
    return g;
  };
  const auto bw = run(0), wb = run(1), fused = run(2);
  CHECK(bw == wb);
  CHECK(bw == fused);
  // And they are not trivially equal: the gradients are not all zero.
  CHECK(std::any_of(bw[0].begin(), bw[0].end(), [](float v) { return v != 0.0f; }));
}

TEST_CASE("two micro-batches accumulated equal one batch, dropout masks included") {
  testing::Deadline deadline("micro-batches");
  auto m = small_model(9);
  const Batch b = random_batch(8, 31);

  m->zero_grad();
  Tape whole;
  ops::LossResult r = forward_loss(*m, b, whole, 0, 8.0f);
  whole.backward_input(r.dlogits, /*need_input_grad=*/false);
  whole.backward_params(r.dlogits);
  const auto one = grads_of(*m);
  const float loss_one = ops::loss_value(r);

  m->zero_grad();
  float loss_two = 0;
  for (int64_t begin : {0, 4}) {
    Tape tape;  // one tape per micro-batch, as a pipeline stage keeps them
    ops::LossResult part = forward_loss(*m, slice(b, begin, begin + 4), tape, begin, 8.0f);
    tape.backward_params(part.dlogits);
    tape.backward_input(part.dlogits, false);
    loss_two += ops::loss_value(part);
  }
  const auto two = grads_of(*m);
  // Not bit-exact: one batch sums the 8 samples' contributions to a weight gradient in one
  // accumulator, two micro-batches add two partial sums of 4 — the same terms, rounded in a
  // different order. float32 rounding of sums this short stays within 1e-6 of the largest
  // gradient of each tensor.
  CHECK(loss_two == doctest::Approx(loss_one).epsilon(1e-6));
  for (size_t t = 0; t < one.size(); ++t) {
    float scale = 0;
    for (float v : one[t]) scale = std::max(scale, std::abs(v));
    REQUIRE(scale > 0);
    for (size_t i = 0; i < one[t].size(); ++i) {
      INFO("parameter " << t << " element " << i << ": " << one[t][i] << " vs " << two[t][i]);
      CHECK(std::abs(one[t][i] - two[t][i]) <= 1e-6f * scale);
    }
  }
}

TEST_CASE("halves release what they no longer need; no-grad mode saves nothing") {
  testing::Deadline deadline("release");
  auto m = small_model(3);
  const Batch b = random_batch(4, 41);
  Allocator& alloc = Allocator::of(Device::cpu(0));
  const Stream s = Stream::default_for(Device::cpu(0));

  SUBCASE("B releases the parameter-free nodes, W the rest") {
    Tape tape;
    ops::LossResult r = forward_loss(*m, b, tape, 0, 4.0f);
    CHECK(tape.size() == 5);
    tape.backward_input(r.dlogits);
    CHECK(tape.live_nodes() == 2);  // conv2d_1 and dense_1 wait for W
    CHECK(tape.live_gradients() == 2);
    tape.backward_params(r.dlogits);
    CHECK(tape.live_nodes() == 0);
    CHECK(tape.live_gradients() == 0);
  }
  SUBCASE("W first keeps only what B still needs: the first node and its output gradient") {
    Tape tape;
    ops::LossResult r = forward_loss(*m, b, tape, 0, 4.0f);
    tape.backward_params(r.dlogits);
    CHECK(tape.live_nodes() == 1);
    CHECK(tape.live_gradients() == 1);
    CHECK(tape.backward_input(r.dlogits).shape() == Shape({4, 1, kSide, kSide}));
    CHECK(tape.live_nodes() == 0);
  }
  SUBCASE("without a tape, only the output stays allocated") {
    const Tensor x = input_of(b);
    s.synchronize();
    const uint64_t before = alloc.stats().in_use;
    ForwardContext ctx;  // training (dropout on), but no tape
    Tensor y = m->forward(x, ctx);
    s.synchronize();
    CHECK(alloc.stats().in_use - before == Allocator::block_size(y.nbytes()));

    Tape tape;  // the same forward with a tape holds its saved activations
    ctx.tape = &tape;
    Tensor y2 = m->forward(x, ctx);
    s.synchronize();
    CHECK(alloc.stats().in_use - before > 2 * Allocator::block_size(y.nbytes()));
  }
}

// The gradients with a ReLU's mask applied by the layer after it (one forward: Sequential
// hands the mask over) and by the ReLU itself (two forwards on two tapes, cut between them:
// nothing is handed across a range's end): a max-pool after a fused or a standalone ReLU, and
// a convolution after one. Then what the handover saves, counted by the allocator.
TEST_CASE("a ReLU's mask taken over by the next layer: the same bits, the ReLU's output freed") {
  testing::Deadline deadline("relu mask downstream");
  enum Kind { pool_after_fused, pool_after_standalone, conv_after_fused };
  for (const Kind kind : {pool_after_fused, pool_after_standalone, conv_after_fused}) {
    CAPTURE(kind);
    auto model = [&] {
      auto m = std::make_unique<Sequential>(7);
      if (kind == pool_after_standalone) {
        m->add(Conv2D(3, {3, 3}, "", {kSide, kSide, 1}));
        m->add(ReLU());
      } else {
        m->add(Conv2D(3, {3, 3}, "relu", {kSide, kSide, 1}));
      }
      if (kind == conv_after_fused)
        m->add(Conv2D(2, {3, 3}, "relu"));  // (3, 4, 4) -> (2, 2, 2)
      else
        m->add(MaxPooling2D({2, 2}));
      m->add(Flatten());
      m->add(Dense(kClasses, "softmax"));
      return m;
    };
    const size_t taker = kind == pool_after_standalone ? 2 : 1;  // the layer after the ReLU
    // Inputs in [-1, 1): about half the conv outputs are negative, so ReLU zeros win pooling
    // windows (ties among zeros included) and the mask matters.
    const Batch b = random_batch(6, 59);
    const Stream s = Stream::default_for(Device::cpu(0));
    // The forward, whole on `first`, or split before `taker` onto `second` too.
    auto forward = [&](Sequential& m, const Tensor& x, Tape& first, Tape* second) {
      ForwardContext ctx;
      ctx.tape = &first;
      Tensor h = m.forward(x, ctx, 0, second ? taker : m.size());
      if (second) {
        ctx.tape = second;
        h = m.forward(h, ctx, taker, m.size());
      }
      return h;
    };
    auto gradients = [&](bool split) {
      auto m = model();
      Tape first, second;
      const Tensor h = forward(*m, input_of(b), first, split ? &second : nullptr);
      const ops::LossResult r =
          ops::softmax_cross_entropy(h, ops::labels_tensor(b.labels, s), 6.0f, s);
      Tensor g = r.dlogits;
      if (split) g = second.backward(g);
      const Tensor dx = first.backward(g);
      auto out = grads_of(*m);
      out.push_back(dx.to_vector());
      return out;
    };
    const auto downstream = gradients(false), at_relu = gradients(true);
    CHECK(downstream == at_relu);
    CHECK(std::any_of(downstream[0].begin(), downstream[0].end(), [](float v) { return v != 0.0f; }));

    // What the tapes and the output hold once the forward has run. A max-pool masks by its own
    // output, so nothing holds the ReLU's output (6, 3, 4, 4) then; without the handover the
    // ReLU's node does. A convolution keeps its input, that same tensor, for its filter
    // gradient anyway.
    Allocator& alloc = Allocator::of(Device::cpu(0));
    auto bytes_held = [&](bool split) {
      auto m = model();
      const Tensor x = input_of(b);
      s.synchronize();
      const uint64_t before = alloc.stats().in_use;
      Tape first, second;
      const Tensor y = forward(*m, x, first, split ? &second : nullptr);
      s.synchronize();  // the enqueued ops hold their operands until they have run
      return alloc.stats().in_use - before;
    };
    const uint64_t relu_output = Allocator::block_size(6 * 3 * 4 * 4 * sizeof(float));
    CHECK(bytes_held(true) - bytes_held(false) == (kind == conv_after_fused ? 0 : relu_output));
  }
}

TEST_CASE("tape misuse is reported") {
  auto m = small_model(3);
  const Batch b = random_batch(2, 43);
  Tape tape;
  ops::LossResult r = forward_loss(*m, b, tape, 0, 2.0f);
  tape.backward_input(r.dlogits);
  CHECK_THROWS_WITH(tape.backward_input(r.dlogits),
                    doctest::Contains("backward_input called twice"));
  const Tensor other = Tensor::zeros(r.dlogits.shape(), Stream::default_for(Device::cpu(0)));
  CHECK_THROWS_WITH(tape.backward_params(other), doctest::Contains("different output gradients"));
  Tape empty;
  CHECK_THROWS_WITH(empty.backward_input(other), doctest::Contains("empty tape"));
}

}  // namespace
}  // namespace brigade::layers::test

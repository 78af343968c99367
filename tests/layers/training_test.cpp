// Training: optimizer steps against the reference update rules, and a few hundred steps of
// single-device training on learnable random data that must lower the loss.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference/optimizers.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "tests/support/deadline.h"

namespace brigade::layers {
namespace {

// One parameter with a given value and gradient on cpu:0.
Parameter param(const std::vector<float>& value, const std::vector<float>& grad) {
  const Shape shape({static_cast<int64_t>(value.size())});
  return Parameter{"p", Tensor::from_vector(value, shape, Device::cpu(0)),
                   Tensor::from_vector(grad, shape, Device::cpu(0))};
}

TEST_CASE("SGD (Nesterov, weight decay) and AdamW steps follow the reference rules exactly") {
  const std::vector<float> p0 = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f};
  const std::vector<float> g = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f};

  SUBCASE("SGD") {
    const SgdParams h{0.1f, 0.9f, 0.0f, 0.01f, true};
    Parameter p = param(p0, g);
    SGD opt({&p}, h);
    std::vector<float> ref_p = p0, buf(p0.size());
    for (int step = 0; step < 3; ++step) {  // the first step initialises the buffer
      opt.step();
      ref::sgd_update(ref_p.data(), g.data(), buf.data(), int64_t(p0.size()), h, step == 0);
    }
    CHECK(p.value.to_vector() == ref_p);
  }
  SUBCASE("AdamW") {
    AdamParams h;
    h.lr = 0.01f;
    h.weight_decay = 0.1f;
    h.decoupled = true;
    Parameter p = param(p0, g);
    Adam opt({&p}, h);
    std::vector<float> ref_p = p0, m(p0.size()), v(p0.size());
    for (int64_t step = 1; step <= 3; ++step) {
      opt.step();
      ref::adam_update(ref_p.data(), g.data(), m.data(), v.data(), int64_t(p0.size()), h, step);
    }
    CHECK(p.value.to_vector() == ref_p);
  }
  SUBCASE("bad hyper-parameters are refused at construction") {
    Parameter p = param(p0, g);
    CHECK_THROWS_WITH(SGD({&p}, SgdParams{0.1f, 0.0f, 0.0f, 0.0f, true}),
                      doctest::Contains("Nesterov"));
  }
}

// What a checkpoint does (tools/train/checkpoint.h): copies a run's parameter and state()
// into a fresh optimizer and sets its step count; the next step must then be the same bits.
template <class Opt, class Hyper>
void check_restores(Hyper h, const std::vector<std::string>& names) {
  const std::vector<float> p0 = {0.5f, -1.25f, 2.0f}, g = {0.1f, -0.2f, 0.3f};
  Parameter run = param(p0, g);
  Opt a({&run}, h);
  a.step();
  a.step();
  Parameter resumed = param(run.value.to_vector(), g);
  Opt b({&resumed}, h);
  std::vector<NamedTensor> from = a.state(), to = b.state();
  REQUIRE(from.size() == names.size());
  REQUIRE(to.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(from[i].name == names[i]);
    copy_async(to[i].tensor, from[i].tensor, to[i].tensor.stream());  // into b's own storage
  }
  b.set_steps(a.steps());
  a.step();
  b.step();
  CHECK(resumed.value.to_vector() == run.value.to_vector());
}

TEST_CASE("state() names the state as checkpoints store it, and restores it exactly") {
  check_restores<SGD>(SgdParams{.lr = 0.1, .momentum = 0.9}, {"sgd.momentum.p"});
  check_restores<SGD>(SgdParams{.lr = 0.1}, {});  // without momentum, no state
  check_restores<Adam>(AdamParams{.lr = 0.01}, {"adam.m.p", "adam.v.p"});
  CHECK(SGD({}, SgdParams{}).kind() == "sgd");
  CHECK(Adam({}, AdamParams{}).kind() == "adam");
}

// Four classes of 8x8 images: class c is unit Gaussian noise plus 0.75 on the 4x4 block of
// quadrant c: learnable, yet not separable at a glance by a single pixel.
struct Data {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Data make_batch(int n, std::mt19937& gen) {
  std::normal_distribution<float> noise(0.0f, 1.0f);
  Data d;
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(gen() % 4);
    d.labels.push_back(c);
    for (int h = 0; h < 8; ++h)
      for (int w = 0; w < 8; ++w) {
        const bool in_block = (h / 4) == c / 2 && (w / 4) == c % 2;
        d.x.push_back(noise(gen) + (in_block ? 0.75f : 0.0f));
      }
  }
  return d;
}

TEST_CASE("a few hundred steps of training on learnable random data lower the loss") {
  testing::Deadline deadline("training");
  Sequential model(2024);
  model.add(Conv2D(4, {3, 3}, "relu", {8, 8, 1}));  // (1, 4, 6, 6)
  model.add(MaxPooling2D({2, 2}));                   // (1, 4, 3, 3)
  model.add(Dropout(0.1));
  model.add(Flatten());
  model.add(Dense(4, "softmax"));
  SGD opt(model.parameters(), SgdParams{0.01f, 0.9f, 0.0f, 0.0f, false});

  const Stream s = Stream::default_for(Device::cpu(0));
  std::mt19937 gen(5);
  const int batch = 16, steps = 300;
  auto mean_loss = [&](int from, int count, const std::vector<float>& losses) {
    double sum = 0;
    for (int i = from; i < from + count; ++i) sum += losses[size_t(i)];
    return sum / count;
  };
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    const Data d = make_batch(batch, gen);
    Tape tape;
    ForwardContext ctx;
    ctx.seed = 99;
    ctx.step = static_cast<uint32_t>(step);
    ctx.tape = &tape;
    const Tensor x = Tensor::from_vector(d.x, Shape({batch, 1, 8, 8}), s);
    ops::LossResult r = ops::softmax_cross_entropy(model.forward(x, ctx),
                                                   ops::labels_tensor(d.labels, s), batch, s);
    tape.backward_input(r.dlogits, false);
    tape.backward_params(r.dlogits);
    opt.step();
    opt.zero_grad();
    losses.push_back(ops::loss_value(r));
  }
  const double first = mean_loss(0, 5, losses), last = mean_loss(steps - 20, 20, losses);
  INFO("mean loss of the first 5 steps " << first << ", of the last 20 " << last);
  CHECK(first > 1.0);         // about ln 4 = 1.386 at chance
  CHECK(last < 0.4 * first);  // learnt: well under half the starting loss

  // And it generalises to fresh samples: accuracy well above chance.
  const Data test = make_batch(200, gen);
  const Tensor x = Tensor::from_vector(test.x, Shape({200, 1, 8, 8}), s);
  ForwardContext eval;
  eval.training = false;
  const int64_t correct =
      ops::accuracy_count(model.forward(x, eval), ops::labels_tensor(test.labels, s), s);
  CHECK(correct >= 160);  // 80%; chance is 25%
}

}  // namespace
}  // namespace brigade::layers

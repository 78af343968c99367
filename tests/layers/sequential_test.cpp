// Sequential: the question's network from C++ with device scopes and from seed_cnn.model,
// layers that do not fit, Keras' initialisation, stage ranges across devices.
#include "layers/sequential.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "kernels/ops.h"
#include "layers/init.h"
#include "layers/model/model_file.h"
#include "tests/layers/model/seed_network.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"

namespace brigade::layers {
namespace {

// The question's Keras code, line for line.
std::unique_ptr<Sequential> question_network(uint64_t seed) {
  auto model = std::make_unique<Sequential>(seed);
  {
    DeviceScope on(Device::parse("cpu:0"));
    model->add(Conv2D(32, {3, 3}, "relu", {28, 28, 1}));
    model->add(Conv2D(64, {3, 3}, "relu"));
    model->add(MaxPooling2D({2, 2}));
  }
  {
    DeviceScope on(Device::parse("cpu:1"));
    model->add(Conv2D(128, {3, 3}, "relu"));
    model->add(MaxPooling2D({2, 2}));
    model->add(Conv2D(64, {3, 3}, "relu"));
    model->add(MaxPooling2D({2, 2}));
  }
  {
    DeviceScope on(Device::parse("cpu:2"));
    model->add(Dropout(0.25));
    model->add(Flatten());
    model->add(Dense(1500, "relu"));
    model->add(Dropout(0.5));
    model->add(Dense(10, "softmax"));
  }
  return model;
}

TEST_CASE("the question's network: C++ with device scopes and seed_cnn.model agree") {
  testing::Deadline deadline("question network");
  auto cpp = question_network(1);
  const model::ModelSpec file = model::load_model_file(BRIGADE_MODELS_DIR "/seed_cnn.model");
  auto from_file = Sequential::from_spec(
      file, {Device::parse("cpu:0"), Device::parse("cpu:1"), Device::parse("cpu:2")}, 1);

  CHECK(cpp->parameter_count() == 278974);  // issue 3's count
  CHECK(from_file->parameter_count() == 278974);
  REQUIRE(cpp->size() == model::test::kSeedOutputs.size());
  REQUIRE(from_file->size() == cpp->size());
  CHECK(cpp->spec() == from_file->spec());
  int64_t counted = 0;
  for (size_t i = 0; i < cpp->size(); ++i) {
    INFO("layer " << i << " " << cpp->layer(i).name());
    CHECK(cpp->layer(i).shape().output == model::test::kSeedOutputs[i]);  // the table
    CHECK(from_file->layer(i).shape().output == cpp->layer(i).shape().output);
    CHECK(from_file->layer(i).name() == cpp->layer(i).name());
    CHECK(from_file->layer(i).device() == cpp->layer(i).device());
    for (Parameter* p : cpp->layer(i).parameters()) counted += p->value.numel();
  }
  CHECK(counted == 278974);  // the tensors really allocated, not only the inferred count
  CHECK(cpp->layer(0).device() == Device::cpu(0));
  CHECK(cpp->layer(3).device() == Device::cpu(1));
  CHECK(cpp->layer(11).device() == Device::cpu(2));
  // Same seed, same weights, whichever way the model was written.
  CHECK(cpp->parameters()[0]->value.to_vector() == from_file->parameters()[0]->value.to_vector());
}

// The message of what `fn` throws ("" when it does not throw).
template <class Fn>
std::string message_of(Fn fn) {
  return brigade::testing::error_text<std::exception>(fn);
}

TEST_CASE("a layer that does not fit is rejected at add() with its name and both shapes") {
  Sequential model;
  model.add(Conv2D(8, {3, 3}, "relu", {6, 6, 1}));   // (1, 8, 4, 4)
  model.add(MaxPooling2D({2, 2}));                   // (1, 8, 2, 2)
  const std::string conv = message_of([&] { model.add(Conv2D(4, {3, 3}, "relu")); });
  INFO(conv);
  CHECK(conv.find("conv2d_2") != std::string::npos);
  CHECK(conv.find("3x3") != std::string::npos);           // the kernel
  CHECK(conv.find("(1, 8, 2, 2)") != std::string::npos);  // the input it does not fit
  const std::string dense = message_of([&] { model.add(Dense(10, "relu")); });
  INFO(dense);
  CHECK(dense.find("dense_1") != std::string::npos);
  CHECK(dense.find("(1, 8, 2, 2)") != std::string::npos);
  CHECK(dense.find("flatten") != std::string::npos);
  CHECK(model.size() == 2);  // nothing was added by the failed calls
  model.add(Flatten());
  model.add(Dense(10, "softmax"));
  CHECK(model.layer(3).shape().output == std::vector<int64_t>{1, 10});

  Sequential no_input;
  CHECK_THROWS_WITH(no_input.add(Dense(3)), doctest::Contains("input_shape"));
  CHECK_THROWS_WITH(Conv2D(3, {3, 3}, "tanh"), doctest::Contains("unknown activation"));
}

TEST_CASE("weights are Glorot-uniform from the seed, biases zero") {
  Sequential a(42), b(42), c(43);
  for (Sequential* m : {&a, &b, &c}) {
    m->add(Conv2D(16, {3, 3}, "relu", {10, 10, 3}));
    m->add(Flatten());
    m->add(Dense(20));
  }
  const std::vector<float> w = a.parameters()[0]->value.to_vector();  // (16, 3, 3, 3)
  const double limit = std::sqrt(6.0 / (3 * 9 + 16 * 9));              // fan_in + fan_out
  double sum = 0, sum_sq = 0;
  for (float v : w) {
    CHECK(std::abs(v) <= limit);
    sum += v;
    sum_sq += double(v) * v;
  }
  // U(-l, l): mean 0, variance l²/3. With 432 draws the sample mean's standard error is
  // l/36, the variance's about 5% of l²/3: the bounds below are four standard errors.
  CHECK(std::abs(sum / w.size()) < limit / 9);
  CHECK(sum_sq / w.size() == doctest::Approx(limit * limit / 3).epsilon(0.2));
  CHECK(w == glorot_uniform(432, 27, 144, 42, 0));  // a pure function of (seed, layer, e)
  CHECK(w == b.parameters()[0]->value.to_vector());
  CHECK(w != c.parameters()[0]->value.to_vector());
  const std::vector<float> bias = a.parameters()[1]->value.to_vector();
  CHECK(std::all_of(bias.begin(), bias.end(), [](float v) { return v == 0.0f; }));
  CHECK(a.parameters()[2]->name == "dense_1.weight");
  CHECK(a.parameters()[2]->value.shape() == Shape({20, 16 * 8 * 8}));  // PyTorch's (out, in)
}

TEST_CASE("stages on two devices: forward by ranges equals the whole forward, gradients flow back") {
  testing::Deadline deadline("stages");
  Sequential model(7);
  {
    DeviceScope on(Device::cpu(0));
    model.add(Conv2D(4, {3, 3}, "relu", {8, 8, 2}));
    model.add(MaxPooling2D({2, 2}));
  }
  {
    DeviceScope on(Device::cpu(1));
    model.add(Flatten());
    model.add(Dense(5, "softmax"));
  }
  std::vector<float> xs(3 * 2 * 8 * 8);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * float(i));
  const Tensor x = Tensor::from_vector(xs, Shape({3, 2, 8, 8}), Device::cpu(0));

  ForwardContext eval;
  eval.training = false;
  const std::vector<float> whole = model.forward(x, eval).to_vector();

  // Two stages, each with its own tape, as the pipeline runs them.
  Tape t0, t1;
  ForwardContext c0, c1;
  c0.tape = &t0;
  c1.tape = &t1;
  const Tensor mid = model.forward(x, c0, 0, 2);
  CHECK(mid.device() == Device::cpu(0));
  const Tensor logits = model.forward(mid, c1, 2, 4);  // moved to cpu:1 inside
  CHECK(logits.device() == Device::cpu(1));
  CHECK(logits.to_vector() == whole);

  const Stream s1 = Stream::default_for(Device::cpu(1));
  ops::LossResult r = ops::softmax_cross_entropy(logits, ops::labels_tensor({0, 3, 4}, s1), 3, s1);
  const Tensor dmid = t1.backward_input(r.dlogits);
  CHECK(dmid.device() == Device::cpu(0));  // the copy node sent it back
  CHECK(dmid.shape() == mid.shape());
  t1.backward_params(r.dlogits);
  t0.backward_input(dmid, /*need_input_grad=*/false);
  t0.backward_params(dmid);
  for (Parameter* p : model.parameters()) {
    const std::vector<float> g = p->grad.to_vector();
    INFO(p->name);
    CHECK(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }));
  }
  // predict: probabilities, rows summing to 1.
  const std::vector<float> probs = model.predict(x).to_vector();
  for (int n = 0; n < 3; ++n) {
    float sum = 0;
    for (int j = 0; j < 5; ++j) sum += probs[size_t(n * 5 + j)];
    CHECK(sum == doctest::Approx(1.0f).epsilon(1e-6));
  }
}

TEST_CASE("a deep model is built layer by layer with the shapes infer_shapes gives the whole") {
  // Building used to infer every shape again at each layer (O(n^2): 73 s for 10,000 layers);
  // the shapes built one layer at a time must be what one pass over the model gives.
  model::ModelSpec spec = model::parse_model("input 6x6x2\nconv2d filters=3 kernel=3\n", "deep");
  for (size_t i = 1; i + 2 < model::kMaxModelLayers; ++i) {
    model::LayerSpec relu;
    relu.kind = model::LayerKind::relu;
    spec.layers.push_back(relu);
  }
  spec.layers.push_back(model::parse_model("input 4\nflatten\n", "f").layers[0]);
  spec.layers.push_back(model::parse_model("input 4\ndense units=5\n", "d").layers[0]);
  model::assign_default_names(spec.layers);
  const auto model = Sequential::from_spec(spec, {Device::cpu(0)}, 1);
  const model::ModelShapes whole = model::infer_shapes(spec.input, spec.layers);
  REQUIRE(model->size() == spec.layers.size());
  CHECK(model->shapes().total_params == whole.total_params);
  CHECK(model->shapes().total_flops == whole.total_flops);
  for (size_t i = 0; i < whole.layers.size(); ++i) {
    CAPTURE(i);
    CHECK(model->shapes().layers[i].input == whole.layers[i].input);
    CHECK(model->shapes().layers[i].output == whole.layers[i].output);
  }
  CHECK(model->layer(spec.layers.size() - 3).name() ==
        "relu_" + std::to_string(spec.layers.size() - 3));
  CHECK(model->layer(spec.layers.size() - 1).shape().output == std::vector<int64_t>{1, 5});
}

TEST_CASE("add() refuses a layer after the output softmax and a softmax twice, adding nothing") {
  Sequential model;
  model.add(Dense(4, "softmax", {8}));
  CHECK_THROWS_WITH(model.add(Dense(3)), doctest::Contains("must be the last layer"));
  CHECK_THROWS_WITH(model.add(Softmax()), doctest::Contains("a softmax applied twice"));
  CHECK(model.size() == 1);
  CHECK(model.shapes().layers.size() == 1);
  Sequential inner;
  inner.add(Dense(4, "", {8}));
  inner.add(Softmax());
  CHECK_THROWS_WITH(inner.add(Softmax()), doctest::Contains("softmax_2: a softmax applied twice"));
  inner.add(Dense(3, "softmax"));
  CHECK(inner.size() == 3);
  CHECK(inner.layer(2).name() == "dense_2");
}

}  // namespace
}  // namespace brigade::layers

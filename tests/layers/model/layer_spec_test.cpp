// Shape inference: the question's network against issue 3's table and hand-computed counts,
// Keras' window arithmetic, and every way a layer can fail to fit.
#include "layers/model/layer_spec.h"

#include <doctest/doctest.h>

#include "tests/layers/model/seed_network.h"

using namespace brigade::model;
using brigade::model::test::seed_layers;

namespace {

std::string shape_error(const std::vector<int64_t>& input, std::vector<LayerSpec> layers) {
  assign_default_names(layers);
  try {
    infer_shapes(input, layers);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("the question's network has the issue's shapes, 278,974 parameters and 37.9 MFLOP") {
  const ModelShapes m = infer_shapes(test::kSeedInput, seed_layers());
  REQUIRE(m.layers.size() == test::kSeedOutputs.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    CAPTURE(i);
    CHECK(m.layers[i].output == test::kSeedOutputs[i]);
    CHECK(m.layers[i].input == (i == 0 ? test::kSeedInput : test::kSeedOutputs[i - 1]));
  }
  // Parameters by hand: conv K*C*R*S + K, dense out*in + out.
  const int64_t params = (32 * 1 * 9 + 32) + (64 * 32 * 9 + 64) + (128 * 64 * 9 + 128) +
                         (64 * 128 * 9 + 64) + (1500 * 64 + 1500) + (10 * 1500 + 10);
  CHECK(params == 278974);
  CHECK(m.total_params == params);
  // FLOPs by hand: 2 * output positions * (K * C * R * S) per conv, 2 * out * in per dense.
  const int64_t flops = 2 * (26 * 26 * 32 * 1 * 9) + 2 * (24 * 24 * 64 * 32 * 9) +
                        2 * (10 * 10 * 128 * 64 * 9) + 2 * (3 * 3 * 64 * 128 * 9) +
                        2 * (1500 * 64) + 2 * (10 * 1500);
  CHECK(m.total_flops == flops);
  CHECK(m.total_flops / 100000 == 379);  // "about 37.9 MFLOP forward per sample"
  CHECK(m.layers[1].flops == 2 * 24 * 24 * 64 * 32 * 9);
  CHECK(m.layers[2].flops == 0);  // pooling comparisons are not counted
  // Pool strides default to the pool size, as in Keras.
  CHECK(m.layers[2].stride_h == 2);
  CHECK(m.layers[2].stride_w == 2);
  CHECK(m.layers[0].stride_h == 1);
}

TEST_CASE("layers are named per kind like Keras and carry PyTorch parameter layouts") {
  const std::vector<LayerSpec> layers = seed_layers();
  CHECK(layers[0].name == "conv2d_1");
  CHECK(layers[3].name == "conv2d_3");
  CHECK(layers[6].name == "maxpool2d_3");
  CHECK(layers[10].name == "dropout_2");
  CHECK(layers[11].name == "dense_2");
  const ModelShapes m = infer_shapes(test::kSeedInput, layers);
  REQUIRE(m.layers[3].param_specs.size() == 2);
  CHECK(m.layers[3].param_specs[0].name == "conv2d_3.weight");
  CHECK(m.layers[3].param_specs[0].shape == std::vector<int64_t>{128, 64, 3, 3});  // OIHW
  CHECK(m.layers[3].param_specs[1].name == "conv2d_3.bias");
  CHECK(m.layers[3].param_specs[1].shape == std::vector<int64_t>{128});
  CHECK(m.layers[9].param_specs[0].shape == std::vector<int64_t>{1500, 64});  // (out, in)
  CHECK(m.layers[8].param_specs.empty());
}

TEST_CASE("window sizes follow Keras: valid floors, same is ceil(in/stride), odd pad at the end") {
  int64_t pad = -1;
  CHECK(window_output_size(28, 3, 1, Padding::valid, &pad) == 26);
  CHECK(pad == 0);
  CHECK(window_output_size(5, 2, 2, Padding::valid) == 2);  // 5x5 pooled 2x2 -> 2x2
  CHECK(window_output_size(3, 2, 2, Padding::valid) == 1);
  CHECK(window_output_size(2, 3, 1, Padding::valid) == 0);  // does not fit
  CHECK(window_output_size(28, 3, 1, Padding::same, &pad) == 28);
  CHECK(pad == 1);  // total 2: one before, one after
  CHECK(window_output_size(5, 3, 2, Padding::same, &pad) == 3);
  CHECK(pad == 1);  // total (3-1)*2 + 3 - 5 = 2
  CHECK(window_output_size(4, 3, 2, Padding::same, &pad) == 2);
  CHECK(pad == 0);  // total (2-1)*2 + 3 - 4 = 1: the odd pixel goes after
  CHECK(window_output_size(2, 3, 1, Padding::same) == 2);  // same always fits
  // No overflow for absurd kernels: the padding is k - r with r in [1, stride].
  CHECK(window_output_size(7, INT64_MAX, 3, Padding::same, &pad) == 3);
  CHECK(pad == (INT64_MAX - 1) / 2);

  std::vector<LayerSpec> same = {test::conv(8, 0)};
  same[0].padding = Padding::same;
  same[0].stride_h = same[0].stride_w = 2;
  assign_default_names(same);
  const ModelShapes m = infer_shapes({1, 1, 28, 28}, same);
  CHECK(m.layers[0].output == std::vector<int64_t>{1, 8, 14, 14});
  CHECK(m.layers[0].pad_top == 0);  // total (14-1)*2 + 3 - 28 = 1
}

TEST_CASE("a layer that cannot fit is rejected with its name and both shapes") {
  using test::conv;
  CHECK(shape_error({1, 1, 6, 6}, {conv(32, 0), conv(64, 0), conv(64, 0)}) ==
        "conv2d_3: kernel 3x3 does not fit input (1, 64, 2, 2) with padding valid");
  CHECK(shape_error({1, 1, 6, 6}, {conv(64, 0), test::dense(10, Activation::none, 0)}) ==
        "dense_1: expects a flat input (1, F), got (1, 64, 4, 4); add 'flatten' before it");
  CHECK(shape_error({1, 64}, {conv(8, 0)}) ==
        "conv2d_1: expects an image input (1, C, H, W), got (1, 64)");
  CHECK(shape_error({1, 64, 1, 1}, {test::pool(0)}) ==
        "maxpool2d_1: pool 2x2 does not fit input (1, 64, 1, 1)");
  LayerSpec softmax;
  softmax.kind = LayerKind::softmax;
  CHECK(shape_error({1, 3, 4, 4}, {softmax}) ==
        "softmax_1: expects a flat input (1, F), got (1, 3, 4, 4); add 'flatten' before it");
}

TEST_CASE("zero, negative and out-of-range fields are rejected by name") {
  LayerSpec c = test::conv(0, 0);
  CHECK(shape_error({1, 1, 8, 8}, {c}) == "conv2d_1: filters must be positive, got 0");
  c = test::conv(4, 0);
  c.kernel_w = -3;
  CHECK(shape_error({1, 1, 8, 8}, {c}) == "conv2d_1: kernel must be positive, got 3x-3");
  c = test::conv(4, 0);
  c.stride_h = -1;
  CHECK(shape_error({1, 1, 8, 8}, {c}) == "conv2d_1: stride must be positive, got -1x0");
  c = test::conv(4, 0);
  c.activation = Activation::softmax;
  CHECK(shape_error({1, 1, 8, 8}, {c}) ==
        "conv2d_1: activation softmax needs a flat output (1, F); use it on a dense layer");
  CHECK(shape_error({1, 4}, {test::dropout(1.0, 0)}) ==
        "dropout_1: rate must be in [0, 1), got 1");
  CHECK(shape_error({1, 4}, {test::dense(0, Activation::none, 0)}) ==
        "dense_1: units must be positive, got 0");
  CHECK(shape_error({1, 4}, {test::dense(3, Activation::none, -1)}) ==
        "dense_1: device must be 0 or more, got -1");
  CHECK_THROWS_WITH_AS(infer_shapes({1, 0, 28, 28}, {}),
                       "input shape (1, 0, 28, 28): expected (1, C, H, W) or (1, F) with every "
                       "size positive",
                       std::invalid_argument);
  CHECK_THROWS_AS(infer_shapes({1, 2, 3}, {}), std::invalid_argument);
}

TEST_CASE("absurd sizes are refused before allocation, saying how much memory they need") {
  // 1e12 units after 64 features: (64e12 + 1e12) floats * 4 bytes = 2.6e14 B = 236.5 TiB.
  CHECK(shape_error({1, 64}, {test::dense(1000000000000, Activation::relu, 0)}) ==
        "dense_1: weights (1000000000000, 64) and bias would need 236.5 TiB of float32, more "
        "than the 16.0 GiB limit for one layer's parameters");
  // 1e18 * 64 does not fit in 64 bits.
  CHECK(shape_error({1, 64}, {test::dense(1000000000000000000, Activation::relu, 0)}) ==
        "dense_1: weights (1000000000000000000, 64) and bias would need more than 8 EiB (the "
        "size overflows 64 bits) of float32, more than the 16.0 GiB limit for one layer's "
        "parameters");
  LayerSpec wide = test::conv(2, 0);
  wide.padding = Padding::same;
  // 2 * 50000 * 50000 floats * 4 bytes = 2e10 B = 18.6 GiB for one sample's output.
  CHECK(shape_error({1, 1, 50000, 50000}, {wide}) ==
        "conv2d_1: output (1, 2, 50000, 50000) would need 18.6 GiB of float32 per sample, more "
        "than the 16.0 GiB limit for one activation");
  LayerSpec huge = test::conv(1 << 22, 0);  // 2^22 * 2^40 weights * 4 bytes = 2^64: overflows
  huge.kernel_h = huge.kernel_w = 1 << 20;
  huge.padding = Padding::same;
  CHECK(shape_error({1, 1, 8, 8}, {huge}) ==
        "conv2d_1: weights (4194304, 1, 1048576, 1048576) and bias would need more than 8 EiB "
        "(the size overflows 64 bits) of float32, more than the 16.0 GiB limit for one "
        "layer's parameters");
  CHECK_THROWS_WITH_AS(infer_shapes({1, 1, 100000, 100000}, {}),
                       "input shape (1, 1, 100000, 100000) would need 37.3 GiB of float32 per "
                       "sample, more than the 16.0 GiB limit",
                       std::invalid_argument);
}

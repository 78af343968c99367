// Model files: the shipped seed_cnn.model against the hand-built network, the printer's
// round trip, and every error a person can make, with its exact message.
#include "layers/model/model_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <fstream>

#include "tests/layers/model/seed_network.h"

using namespace brigade::model;

namespace {

const std::string kSeedPath = std::string(BRIGADE_MODELS_DIR) + "/seed_cnn.model";

std::string error_of(const std::string& text) {
  try {
    parse_model(text, "t.model");
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "(no error)";
}

// Line numbers are where a layer was written; two specs of one model differ only there.
std::vector<LayerSpec> without_lines(std::vector<LayerSpec> layers) {
  for (LayerSpec& l : layers) l.line = 0;
  return layers;
}

}  // namespace

TEST_CASE("seed_cnn.model is the question's network, placed on three devices") {
  const ModelSpec m = load_model_file(kSeedPath);
  CHECK(m.input == test::kSeedInput);  // "input 28x28x1" is H x W x C -> (1, 1, 28, 28)
  CHECK(m.device_count == 3);
  CHECK(without_lines(m.layers) == test::seed_layers());  // same kinds, sizes, devices, names
  CHECK(m.layers[0].line == 6);
  const ModelShapes shapes = infer_shapes(m.input, m.layers);
  for (size_t i = 0; i < shapes.layers.size(); ++i) CHECK(shapes.layers[i].output == test::kSeedOutputs[i]);
  CHECK(shapes.total_params == 278974);
  CHECK(shapes.total_flops == 37917744);  // the hand computation in layer_spec_test.cpp
}

TEST_CASE("print_model round-trips: parse(print(m)) == m, and printing is stable") {
  const ModelSpec m = load_model_file(kSeedPath);
  const std::string text = print_model(m);
  CHECK(text.rfind("input 28x28x1\ndevice 0\nconv2d filters=32 kernel=3x3 activation=relu\n", 0) == 0);
  ModelSpec again = parse_model(text, "printed");
  CHECK(again.input == m.input);
  CHECK(again.device_count == m.device_count);
  CHECK(without_lines(again.layers) == without_lines(m.layers));
  CHECK(print_model(again) == text);

  // Every optional key, and a flat input, survive the trip too.
  const std::string rich =
      "input 784\n"
      "dense units=300 activation=relu\n"
      "dropout rate=0.1\n"
      "dense units=10\n"
      "softmax\n";
  const std::string image =
      "input 32x30x3\n"
      "conv2d filters=8 kernel=5x3 stride=2x1 padding=same\n"
      "relu\n"
      "maxpool2d pool=3 stride=1\n"
      "flatten\n";
  for (const std::string& source : {rich, image}) {
    const ModelSpec a = parse_model(source, "a");
    const ModelSpec b = parse_model(print_model(a), "b");
    CHECK(without_lines(a.layers) == without_lines(b.layers));
    CHECK(a.input == b.input);
  }
  const ModelSpec img = parse_model(image, "a");
  CHECK(img.input == std::vector<int64_t>{1, 3, 32, 30});
  CHECK(img.layers[0].kernel_h == 5);
  CHECK(img.layers[0].kernel_w == 3);
  CHECK(img.layers[2].pool_w == 3);  // "pool=3" means 3x3
  CHECK(img.layers[2].stride_h == 1);
  CHECK(img.device_count == 1);      // no device lines: one block, device 0
}

TEST_CASE("every model shipped in tools/models parses, round-trips and has the counts it states") {
  // Parameter counts by hand: conv K*C*R*S + K, dense out*in + out.
  const std::map<std::string, int64_t> params = {
      {"seed_cnn.model", 278974},
      {"tiny_cnn.model", (8 * 1 * 9 + 8) + (16 * 8 * 9 + 16) + (10 * 400 + 10)},
      {"mlp.model", (256 * 784 + 256) + (128 * 256 + 128) + (10 * 128 + 10)},
  };
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(BRIGADE_MODELS_DIR)) {
    if (entry.path().extension() != ".model") continue;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    REQUIRE(params.count(name) == 1);  // a new sample model adds its count above
    const ModelSpec m = load_model_file(entry.path().string());
    CHECK(infer_shapes(m.input, m.layers).total_params == params.at(name));
    CHECK(without_lines(parse_model(print_model(m), "printed").layers) == without_lines(m.layers));
    ++seen;
  }
  CHECK(seen == params.size());
}

TEST_CASE("comments, blank lines, tabs and CRLF are accepted") {
  const ModelSpec m = parse_model(
      "# a comment line\r\n"
      "\r\n"
      "  input\t4x4x2   # trailing comment\r\n"
      "\tflatten#no space before the comment\r\n"
      "dense units=3 activation=softmax\r\n",
      "crlf.model");
  REQUIRE(m.layers.size() == 2);
  CHECK(m.layers[0].kind == LayerKind::flatten);
  CHECK(m.layers[1].line == 5);
  CHECK(m.layers[1].activation == Activation::softmax);
}

TEST_CASE("syntax errors name the file, line and column and what was expected") {
  const std::string head = "input 28x28x1\n";
  CHECK(error_of(head + "\nconv2d filter=32 kernel=3x3\n") ==
        "t.model:3:8: unknown key 'filter' for conv2d (expected filters, kernel, activation, "
        "stride, padding)");
  CHECK(error_of(head + "conv3d filters=1\n") ==
        "t.model:2:1: unknown layer 'conv3d' (expected input, device, conv2d, maxpool2d, "
        "dropout, flatten, dense, relu, softmax)");
  CHECK(error_of(head + "flatten\ndense units=10 units=20\n") ==
        "t.model:3:16: duplicate key 'units' for dense (first at column 7)");
  CHECK(error_of(head + "conv2d filters=32\n") ==
        "t.model:2:1: conv2d needs kernel= (required: filters, kernel)");
  CHECK(error_of(head + "flatten\ndense units=1O\n") ==
        "t.model:3:13: malformed number '1O' for units (expected a positive integer)");
  CHECK(error_of(head + "flatten\ndense units=-5\n") ==
        "t.model:3:13: malformed number '-5' for units (expected a positive integer)");
  CHECK(error_of(head + "flatten\ndense units=99999999999999999999\n") ==
        "t.model:3:13: number '99999999999999999999' for units is too large (at most "
        "9223372036854775807)");
  CHECK(error_of(head + "conv2d filters=0 kernel=3x3\n") ==
        "t.model:2:16: filters must be positive, got 0");
  CHECK(error_of(head + "conv2d filters=4 kernel=3x\n") ==
        "t.model:2:25: malformed size '3x' for kernel (expected RxS like 3x3, or one number "
        "like 3)");
  CHECK(error_of(head + "conv2d filters=4 kernel=3x3x3\n") ==
        "t.model:2:25: malformed size '3x3x3' for kernel (expected RxS like 3x3, or one number "
        "like 3)");
  CHECK(error_of(head + "conv2d filters=4 kernel=3x3 activation=tanh\n") ==
        "t.model:2:40: unknown activation 'tanh' (expected none, relu, softmax)");
  CHECK(error_of(head + "conv2d filters=4 kernel=3x3 padding=full\n") ==
        "t.model:2:37: unknown padding 'full' (expected valid, same)");
  CHECK(error_of(head + "dropout rate=1.5\n") == "t.model:2:14: rate must be in [0, 1), got 1.5");
  CHECK(error_of(head + "dropout rate=nan\n") ==
        "t.model:2:14: malformed number 'nan' for rate (expected e.g. 0.25)");
  CHECK(error_of(head + "dropout rate=\n") == "t.model:2:14: missing value for key 'rate'");
  CHECK(error_of(head + "dense 10\n") == "t.model:2:7: expected key=value after dense, got '10'");
  CHECK(error_of(head + "flatten x=1\n") ==
        "t.model:2:9: unknown key 'x' for flatten (it takes no arguments)");
  CHECK(error_of(head + "flatten\x01\n") ==
        "t.model:2:1: unknown layer 'flatten\\x01' (expected input, device, conv2d, maxpool2d, "
        "dropout, flatten, dense, relu, softmax)");
}

TEST_CASE("input and device lines: order, gaps, empty blocks, missing input") {
  CHECK(error_of("# only a comment\n") ==
        "t.model: no 'input' line (expected e.g. 'input 28x28x1' before the first layer)");
  CHECK(error_of("\ninput 28x28x1 # and nothing else\n") ==
        "t.model: no layers after the 'input' line on line 2");
  CHECK(error_of("dense units=1\n") ==
        "t.model:1:1: expected 'input HxWxC' (e.g. 'input 28x28x1') before 'dense'");
  CHECK(error_of("input 4x4x1\ninput 4x4x1\n") ==
        "t.model:2:1: second 'input' line (the first is on line 1)");
  CHECK(error_of("input 28x28\n") ==
        "t.model:1:7: malformed size '28x28' for input (expected HxWxC like 28x28x1, or F like "
        "784)");
  CHECK(error_of("input 4x0x1\n") == "t.model:1:9: input must be positive, got 0");
  CHECK(error_of("input\n") ==
        "t.model:1:1: 'input' takes one shape (HxWxC like 28x28x1, or F like 784)");
  CHECK(error_of("input 8\ndevice 0\nrelu\ndevice 2\nrelu\n") ==
        "t.model:4:8: device 2 out of order: expected device 1 (blocks are numbered 0, 1, 2, "
        "... in order, without gaps)");
  CHECK(error_of("input 8\ndevice 1\nrelu\n") ==
        "t.model:2:8: device 1 out of order: expected device 0 (blocks are numbered 0, 1, 2, "
        "... in order, without gaps)");
  CHECK(error_of("input 8\ndevice 0\nrelu\ndevice 1\n\ndevice 2\nrelu\n") ==
        "t.model:4:1: device 1 has no layers before 'device 2' on line 6");
  CHECK(error_of("input 8\ndevice 0\nrelu\ndevice 1 # nothing follows\n") ==
        "t.model:4:1: device 1 has no layers before the end of the file");
  CHECK(error_of("input 8\nrelu\ndevice 0\nrelu\n") ==
        "t.model:3:1: 'device 0' after layers that are in no device block (put 'device 0' "
        "before the first layer, or use no device lines)");
  CHECK(error_of("input 8\ndevice 99999999999999999999\n") ==
        "t.model:2:8: number '99999999999999999999' for device is too large (at most "
        "9223372036854775807)");
  CHECK(error_of("input 8\ndevice\n") == "t.model:2:1: 'device' takes one block number, e.g. 'device 0'");
}

TEST_CASE("shape errors from a file point at the layer's line") {
  CHECK(error_of("input 6x6x1\n"
                 "conv2d filters=32 kernel=3x3\n"
                 "conv2d filters=64 kernel=3x3\n"
                 "# the third no longer fits\n"
                 "  conv2d filters=64 kernel=3x3\n") ==
        "t.model:5:3: conv2d_3: kernel 3x3 does not fit input (1, 64, 2, 2) with padding valid");
  CHECK(error_of("input 28x28x1\nconv2d filters=8 kernel=3x3\ndense units=10\n") ==
        "t.model:3:1: dense_1: expects a flat input (1, F), got (1, 8, 26, 26); add 'flatten' "
        "before it");
  CHECK(error_of("input 64\ndense units=1000000000000\n") ==
        "t.model:2:1: dense_1: weights (1000000000000, 64) and bias would need 236.5 TiB of "
        "float32, more than the 16.0 GiB limit for one layer's parameters");
  CHECK(error_of("input 100000x100000x1\nflatten\n") ==
        "t.model:1:1: input shape (1, 1, 100000, 100000) would need 37.3 GiB of float32 per "
        "sample, more than the 16.0 GiB limit");
}

TEST_CASE("missing and oversized files are refused with their path") {
  CHECK_THROWS_WITH_AS(load_model_file("/nonexistent/x.model"),
                       "cannot open model file '/nonexistent/x.model': No such file or directory",
                       ModelFileError);
  CHECK_THROWS_WITH_AS(load_model_file("/tmp"), "cannot read model file '/tmp': it is a directory",
                       ModelFileError);
  const std::string big = "/tmp/brigade_big_" + std::to_string(::getpid()) + ".model";
  {
    std::ofstream out(big);
    out << "input 4\n" << std::string(kMaxModelFileBytes, '#') << "\n";
  }
  CHECK_THROWS_WITH_AS(load_model_file(big), (big + ": larger than the 1 MiB limit for a model file").c_str(),
                       ModelFileError);
  std::remove(big.c_str());
  CHECK(error_of("input 4\nrelu\n" + std::string(kMaxModelFileBytes, '#')) ==
        "t.model: larger than the 1 MiB limit for a model file");
}

TEST_CASE("a trailing softmax after a plain dense is the output activation, folded once") {
  // Keras' Dense(10) + Activation('softmax') is Dense(10, activation='softmax'): the same
  // spec, so the loss applies the softmax once (issue 20: it applied it twice).
  const ModelSpec folded = parse_model("input 4x4x1\nflatten\ndense units=3\nsoftmax\n", "a");
  const ModelSpec written =
      parse_model("input 4x4x1\nflatten\ndense units=3 activation=softmax\n", "b");
  CHECK(without_lines(folded.layers) == without_lines(written.layers));
  CHECK(folded.layers.back().line == 3);  // the dense's line
  // In its own block with the dense: the fold leaves every block non-empty.
  CHECK(parse_model("input 4\ndevice 0\nrelu\ndevice 1\ndense units=3\nsoftmax\n", "c")
            .device_count == 2);
  // A softmax inside the model (more layers follow) is an ordinary layer.
  const ModelSpec inner =
      parse_model("input 4\ndense units=8\nsoftmax\ndense units=3 activation=softmax\n", "d");
  REQUIRE(inner.layers.size() == 3);
  CHECK(inner.layers[1].kind == LayerKind::softmax);
}

TEST_CASE("any other softmax the loss would apply twice is refused at its line") {
  CHECK(error_of("input 4\ndense units=3 activation=softmax\nsoftmax\n") ==
        "t.model:3:1: a softmax applied twice: the dense on line 2 already has "
        "activation=softmax; remove one");
  CHECK(error_of("input 4\ndense units=3\nsoftmax\nsoftmax\n") ==
        "t.model:4:1: a softmax applied twice: the softmax on line 3 is right before it; "
        "remove one");
  CHECK(error_of("input 4\ndense units=3\nsoftmax\nsoftmax\nrelu\n") ==
        "t.model:4:1: softmax_2: a softmax applied twice (softmax_1 is right before it); "
        "remove one");
  CHECK(error_of("input 4\ndense units=3 activation=relu\nsoftmax\n") ==
        "t.model:3:1: a softmax as the last layer is the output activation, which the loss "
        "applies to the logits (softmax cross-entropy), so it must follow a dense without "
        "activation, not the dense with activation=relu on line 2 (the loss would apply a "
        "softmax to a softmax)");
  CHECK(error_of("input 4\nrelu\nsoftmax\n") ==
        "t.model:3:1: a softmax as the last layer is the output activation, which the loss "
        "applies to the logits (softmax cross-entropy), so it must follow a dense layer "
        "without activation, not the relu on line 2");
  CHECK(error_of("input 4\nsoftmax\n") ==
        "t.model:2:1: a softmax as the last layer is the output activation, which the loss "
        "applies to the logits (softmax cross-entropy), so it must follow a dense layer "
        "without activation, and it is the only layer");
  CHECK(error_of("input 4\ndevice 0\ndense units=3\ndevice 1\nsoftmax\n") ==
        "t.model:5:1: a softmax as the last layer is the output activation, which the loss "
        "applies to the logits (softmax cross-entropy), folded into the dense on line 3 "
        "(activation=softmax), which would leave device 1 without layers: put the softmax in "
        "that dense's block");
  // The output activation anywhere but last: its module outputs logits, so it is refused.
  CHECK(error_of("input 4\ndense units=3 activation=softmax\ndense units=3\n") ==
        "t.model:2:1: dense_1: activation softmax is the output activation (the loss applies "
        "it to this layer's logits), so it must be the last layer, but dense_2 follows it; for "
        "a softmax inside the model, use a dense without activation and a `softmax` line");
}

TEST_CASE("a UTF-8 byte order mark before the first line is skipped") {
  const ModelSpec m = parse_model("\xef\xbb\xbfinput 4\ndense units=3 activation=softmax\n", "bom");
  CHECK(m.input == std::vector<int64_t>{1, 4});
  // Anywhere else it is still a stray byte sequence.
  CHECK(error_of("input 4\n\xef\xbb\xbf" "dense units=3\n") ==
        "t.model:2:1: unknown layer '\\xef\\xbb\\xbfdense' (expected input, device, conv2d, "
        "maxpool2d, dropout, flatten, dense, relu, softmax)");
}

TEST_CASE("a model file holds at most kMaxModelLayers layers") {
  std::string text = "input 4\n";
  for (size_t i = 0; i < kMaxModelLayers; ++i) text += "relu\n";
  CHECK(parse_model(text, "deep").layers.size() == kMaxModelLayers);
  CHECK(error_of(text + "relu\n") ==
        "t.model:10002:1: more than 10000 layers, the limit for a model file (the deepest "
        "networks trained in practice have about 1,000)");
}

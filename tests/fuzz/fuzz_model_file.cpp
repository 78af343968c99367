// Fuzz target: the model-file parser (layers/model/model_file.h) and the shape inference behind it.
//
// Any input either parses or throws ModelFileError with a short, printable message; any
// other exception, a sanitizer report or a hang is a bug. An input that parses must also
// keep the parser's promises: its shapes infer without error, and printing it gives the
// canonical text, which parses back to the same layers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "layers/model/model_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace model = brigade::model;
using brigade::fuzz::require;

namespace {

std::vector<model::LayerSpec> without_lines(std::vector<model::LayerSpec> layers) {
  for (model::LayerSpec& l : layers) l.line = 0;
  return layers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  model::ModelSpec m;
  try {
    m = model::parse_model(text, "fuzz.model");
  } catch (const model::ModelFileError& e) {
    brigade::fuzz::check_message(e.what(), 1024);
    return 0;
  }
  // parse_model promises a spec that builds: its shapes infer without a ShapeError.
  const model::ModelShapes shapes = model::infer_shapes(m.input, m.layers);
  require(shapes.layers.size() == m.layers.size(), "one LayerShape per layer");
  require(m.device_count >= 1 && m.layers.back().device == m.device_count - 1,
          "the last layer is in the last device block");

  const std::string printed = model::print_model(m);
  const model::ModelSpec again = model::parse_model(printed, "printed");
  require(again.input == m.input && again.device_count == m.device_count,
          "print_model keeps the input and the device blocks");
  require(without_lines(again.layers) == without_lines(m.layers),
          "parse_model(print_model(m)) has m's layers");
  require(model::print_model(again) == printed, "print_model is canonical");
  return 0;
}

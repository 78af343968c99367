// Model files: the text form of a network, one layer per line, for the command line.
//
//   input 28x28x1                                  # H x W x C, as Keras' input_shape
//   device 0                                       # opens the block placed on device 0
//   conv2d filters=32 kernel=3x3 activation=relu   # [stride=1] [padding=valid|same]
//   maxpool2d pool=2x2                             # [stride=2]: defaults to the pool size
//   dropout rate=0.25
//   flatten
//   dense units=10 activation=softmax
//
// tools/models/README.md is the full grammar. parse_model() checks the syntax and then the
// shapes (infer_shapes), so a ModelSpec it returns always builds; every error is one line
// "file:line:column: what was found and what was expected".
//
// The parser is written for hostile input (it is fuzzed): it reads the text once, line by
// line, without recursion; numbers are range-checked as they are read; nothing is allocated
// from a number in the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "layers/model/layer_spec.h"

namespace brigade::model {

struct ModelSpec {
  std::vector<int64_t> input;     // per sample, (1, C, H, W) or (1, F)
  std::vector<LayerSpec> layers;  // named conv2d_1, ...; layer.device is its block
  int device_count = 1;           // device blocks; a file without `device` lines has one

  bool operator==(const ModelSpec&) const = default;
};

// A malformed, unreadable or impossible model file. what() is the whole message.
class ModelFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model file larger than this is refused before it is read (the question's network is
// 300 bytes; a megabyte is thousands of layers).
inline constexpr size_t kMaxModelFileBytes = size_t{1} << 20;

// A model file of more layers is refused as it is read. The deepest networks trained in
// practice have about a thousand (ResNet-1001); every layer is a module, a node on the tape
// and a task per micro-batch, so ten times that is a generated file gone wrong, not a model.
inline constexpr size_t kMaxModelLayers = 10000;
inline constexpr const char* kMaxModelLayersWhy =
    "the deepest networks trained in practice have about 1,000";

// Parses `text` (at most kMaxModelFileBytes; a UTF-8 byte order mark first is skipped); `source` names it in messages (usually the
// path). A model needs an `input` line and at least one layer. Throws ModelFileError.
ModelSpec parse_model(std::string_view text, std::string_view source);

// Reads and parses the file at `path`. Throws ModelFileError (missing, too large, malformed).
ModelSpec load_model_file(const std::string& path);

// The canonical text of `model`: parse_model(print_model(m)) gives m back (line numbers
// aside). Defaults are left out; every layer's block has its `device K` line. Names are not
// written: parsing numbers the layers again (conv2d_1, ...).
std::string print_model(const ModelSpec& model);

}  // namespace brigade::model

// LayerSpec and shape inference: a model described as plain data, before any tensor exists.
//
// A LayerSpec holds what a Keras call holds — Conv2D(filters, kernel_size, strides, padding,
// activation), MaxPooling2D(pool_size, strides), Dropout(rate), Flatten(), Dense(units,
// activation), ReLU(), Softmax() — plus the device block it belongs to (the question's
// `with tf.device(...)` blocks, numbered 0, 1, 2, ...), its name and its source line.
//
// infer_shapes() walks the layers from the input shape and returns, per layer, the input and
// output shapes, the parameter tensors (PyTorch names and layouts) and the forward FLOPs, or
// throws ShapeError naming the layer and both shapes. It allocates nothing that depends on
// the sizes: an absurd layer (a 1e12-unit Dense) is rejected with the memory it would need.
//
// Shapes are per sample and NCHW with N = 1, as PyTorch prints them: (1, C, H, W) for images
// and (1, F) for flat features. A model file and Keras write the input as H x W x C.
// Nothing here depends on engine/ (no Tensor): the parser above it is fuzzed on its own.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/shapes.h"

namespace brigade::model {

enum class LayerKind { conv2d, maxpool2d, dropout, flatten, dense, relu, softmax };
// Padding, padding_name and the window rule are the kernels' (kernels/shapes.h): one rule
// for the shapes a model file declares and the shapes the kernels compute.
using brigade::Padding;
using brigade::padding_name;
using brigade::window_output_size;
enum class Activation { none, relu, softmax };

// The keyword of a kind in model files and layer names: "conv2d", "maxpool2d", ...
std::string_view kind_name(LayerKind kind);
std::string_view activation_name(Activation activation);

struct LayerSpec {
  LayerKind kind = LayerKind::flatten;
  std::string name;  // "conv2d_1": the kind's keyword and its 1-based count among that kind
  int device = 0;    // index of the device block the layer is placed in
  int line = 0;      // line in the model file; 0 when the spec was built in code

  // conv2d: filters, kernel, stride, padding, activation. maxpool2d: pool, stride
  // (a pool's stride defaults to its pool size, as in Keras).
  int64_t filters = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t pool_h = 0, pool_w = 0;
  int64_t stride_h = 0, stride_w = 0;       // 0: the default (conv 1, pool = pool size)
  Padding padding = Padding::valid;
  Activation activation = Activation::none;  // conv2d and dense
  double rate = 0.0;                         // dropout: probability of zeroing an element
  int64_t units = 0;                         // dense

  bool operator==(const LayerSpec&) const = default;
};

// Gives every layer its Keras-style name (conv2d_1, conv2d_2, maxpool2d_1, dense_1, ...),
// counting each kind separately from 1, in order.
void assign_default_names(std::vector<LayerSpec>& layers);

// A parameter tensor of a layer, named and laid out as PyTorch does: conv2d weight
// (K, C, R, S) = OIHW, dense weight (out, in), biases (K) and (out).
struct ParamSpec {
  std::string name;            // "conv2d_1.weight", "conv2d_1.bias"
  std::vector<int64_t> shape;  // as above
};

struct LayerShape {
  std::vector<int64_t> input;   // (1, C, H, W) or (1, F)
  std::vector<int64_t> output;  // same convention
  int64_t stride_h = 1, stride_w = 1;  // the stride in effect (defaults resolved)
  int64_t pad_top = 0, pad_left = 0;  // "same" padding: Keras puts the odd pixel at the end
  int64_t params = 0;           // weights + biases: conv K*C*R*S + K, dense out*in + out
  std::vector<ParamSpec> param_specs;
  int64_t flops = 0;            // forward FLOPs per sample, 2 * multiply-accumulates
};

struct ModelShapes {
  std::vector<LayerShape> layers;  // one per LayerSpec, same order
  int64_t total_params = 0;
  int64_t total_flops = 0;         // forward, per sample
};

// A layer that cannot exist or cannot fit. layer_index says which layer (so a model file
// can prefix its line); what() already names the layer and the shapes.
class ShapeError : public std::runtime_error {
 public:
  ShapeError(size_t layer_index, const std::string& message)
      : std::runtime_error(message), layer_index_(layer_index) {}
  size_t layer_index() const { return layer_index_; }

 private:
  size_t layer_index_;
};

// Bounds checked before anything is allocated, in float32 bytes. 16 GiB is 4 Gi floats: a
// layer that large cannot be trained on any one device this engine targets (an H200 holds
// 141 GB; weights + gradient + Adam's two moments would need 64 GiB), yet the bound is
// far below where 64-bit byte counts could overflow.
inline constexpr int64_t kMaxLayerParamBytes = int64_t{16} << 30;       // one layer's params
inline constexpr int64_t kMaxActivationBytesPerSample = int64_t{16} << 30;  // one output

// input: per-sample shape, (1, C, H, W) or (1, F). Throws ShapeError for a layer, and
// std::invalid_argument for the input shape.
//
// Softmax, whose place is decided here: `dense ... activation=softmax` is the output activation
// (the loss applies the softmax to its logits, module.h), so it must be the last layer; a
// `softmax` layer right after a softmax (a layer or a dense's activation) is refused as a
// softmax applied twice. (A model file's trailing `softmax` after a plain dense is folded
// into that dense before this, parse_model.)
ModelShapes infer_shapes(const std::vector<int64_t>& input, const std::vector<LayerSpec>& layers);

// The per-sample input shape checked alone (what infer_shapes checks before any layer).
// Throws std::invalid_argument.
void check_input_shape(const std::vector<int64_t>& input);

// Appends layer `index` of a model to `model` (its shapes on the previous layer's output, or
// on `input` for the first; the totals updated): one step of infer_shapes, so that a model
// built layer by layer (Sequential::add) costs O(1) per layer, not O(layers). `previous` is
// the layer before it (null for the first). Throws ShapeError, leaving `model` unchanged.
void append_layer_shape(ModelShapes& model, const std::vector<int64_t>& input,
                        const LayerSpec* previous, const LayerSpec& layer, size_t index);

// "(1, 64, 2, 2)"
std::string format_dims(const std::vector<int64_t>& dims);

}  // namespace brigade::model

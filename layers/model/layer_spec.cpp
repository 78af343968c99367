#include "layers/model/layer_spec.h"

#include <array>
#include <cstdio>
#include <optional>

#include "layers/model/checked_math.h"

namespace brigade::model {

std::string_view kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv2d: return "conv2d";
    case LayerKind::maxpool2d: return "maxpool2d";
    case LayerKind::dropout: return "dropout";
    case LayerKind::flatten: return "flatten";
    case LayerKind::dense: return "dense";
    case LayerKind::relu: return "relu";
    case LayerKind::softmax: return "softmax";
  }
  return "?";
}

std::string_view activation_name(Activation activation) {
  switch (activation) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::softmax: return "softmax";
  }
  return "?";
}

void assign_default_names(std::vector<LayerSpec>& layers) {
  std::array<int, 7> count{};  // one counter per LayerKind
  for (LayerSpec& layer : layers) {
    const int n = ++count[static_cast<size_t>(layer.kind)];
    layer.name = std::string(kind_name(layer.kind)) + "_" + std::to_string(n);
  }
}

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

namespace {

std::string label(const LayerSpec& layer, size_t index) {
  if (!layer.name.empty()) return layer.name;
  return "layer " + std::to_string(index + 1) + " (" + std::string(kind_name(layer.kind)) + ")";
}

std::string pair(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// Everything about a layer that is wrong whatever its input: sizes, rates, activations.
void validate_fields(const LayerSpec& l, size_t index) {
  const std::string who = label(l, index);
  auto fail = [&](const std::string& what) { throw ShapeError(index, who + ": " + what); };
  if (l.device < 0) fail("device must be 0 or more, got " + std::to_string(l.device));
  if (l.stride_h < 0 || l.stride_w < 0)
    fail("stride must be positive, got " + pair(l.stride_h, l.stride_w));
  switch (l.kind) {
    case LayerKind::conv2d:
      if (l.filters <= 0) fail("filters must be positive, got " + std::to_string(l.filters));
      if (l.kernel_h <= 0 || l.kernel_w <= 0)
        fail("kernel must be positive, got " + pair(l.kernel_h, l.kernel_w));
      if (l.activation == Activation::softmax)
        fail("activation softmax needs a flat output (1, F); use it on a dense layer");
      break;
    case LayerKind::maxpool2d:
      if (l.pool_h <= 0 || l.pool_w <= 0)
        fail("pool must be positive, got " + pair(l.pool_h, l.pool_w));
      if (l.padding != Padding::valid) fail("pooling supports padding valid only");
      break;
    case LayerKind::dropout:
      if (!(l.rate >= 0.0 && l.rate < 1.0)) {  // also rejects NaN
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", l.rate);
        fail(std::string("rate must be in [0, 1), got ") + buf);
      }
      break;
    case LayerKind::dense:
      if (l.units <= 0) fail("units must be positive, got " + std::to_string(l.units));
      break;
    case LayerKind::flatten:
    case LayerKind::relu:
    case LayerKind::softmax:
      break;
  }
}

// float32 bytes of `count` elements, or nullopt when that overflows.
std::optional<int64_t> f32_bytes(std::optional<int64_t> count) {
  if (!count) return std::nullopt;
  return checked::mul(*count, int64_t{4});
}

std::string need(std::optional<int64_t> bytes) {
  return bytes ? checked::format_bytes(static_cast<uint64_t>(*bytes))
               : std::string("more than 8 EiB (the size overflows 64 bits)");
}

// A softmax where the loss would apply it again, or after another softmax.
void check_softmax_order(const LayerSpec* previous, const LayerSpec& l, size_t index) {
  if (!previous) return;
  const bool previous_output = previous->kind == LayerKind::dense &&
                               previous->activation == Activation::softmax;
  if (previous_output)
    throw ShapeError(index - 1, label(*previous, index - 1) +
                                    ": activation softmax is the output activation (the loss "
                                    "applies it to this layer's logits), so it must be the last "
                                    "layer, but " + label(l, index) + " follows it" +
                                    (l.kind == LayerKind::softmax
                                         ? ": a softmax applied twice; remove one"
                                         : "; for a softmax inside the model, use a dense "
                                           "without activation and a `softmax` line"));
  if (previous->kind == LayerKind::softmax && l.kind == LayerKind::softmax)
    throw ShapeError(index, label(l, index) + ": a softmax applied twice (" +
                                label(*previous, index - 1) + " is right before it); remove one");
}

}  // namespace

void check_input_shape(const std::vector<int64_t>& input) {
  bool positive = input.size() == 4 || input.size() == 2;
  for (int64_t d : input) positive = positive && d > 0;
  if (!positive || input[0] != 1)
    throw std::invalid_argument("input shape " + format_dims(input) +
                                ": expected (1, C, H, W) or (1, F) with every size positive");
  std::optional<int64_t> input_elements = int64_t{1};
  for (int64_t d : input)
    input_elements = input_elements ? checked::mul(*input_elements, d) : std::nullopt;
  const auto input_bytes = f32_bytes(input_elements);
  if (!input_bytes || *input_bytes > kMaxActivationBytesPerSample)
    throw std::invalid_argument("input shape " + format_dims(input) + " would need " +
                                need(input_bytes) + " of float32 per sample, more than the " +
                                checked::format_bytes(kMaxActivationBytesPerSample) + " limit");
}

ModelShapes infer_shapes(const std::vector<int64_t>& input,
                         const std::vector<LayerSpec>& layers) {
  check_input_shape(input);
  ModelShapes model;
  model.layers.reserve(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    append_layer_shape(model, input, i ? &layers[i - 1] : nullptr, layers[i], i);
  return model;
}

void append_layer_shape(ModelShapes& model, const std::vector<int64_t>& input,
                        const LayerSpec* previous, const LayerSpec& l, size_t i) {
  validate_fields(l, i);
  check_softmax_order(previous, l, i);
  const std::vector<int64_t>& x = model.layers.empty() ? input : model.layers.back().output;
  const std::string who = label(l, i);
  auto fail = [&](const std::string& what) { throw ShapeError(i, who + ": " + what); };
  auto need_image = [&] {
    if (x.size() != 4) fail("expects an image input (1, C, H, W), got " + format_dims(x));
  };
  auto need_flat = [&] {
    if (x.size() != 2)
      fail("expects a flat input (1, F), got " + format_dims(x) + "; add 'flatten' before it");
  };

  LayerShape s;
  s.input = x;
  // A layer of weights `w` (`weights` elements, unset on overflow) and a bias of `units`: its
  // parameters, bounded before anything is allocated, and their names.
  auto weights_and_bias = [&](const std::vector<int64_t>& w, std::optional<int64_t> weights,
                              int64_t units) {
    std::optional<int64_t> count = weights ? checked::add(*weights, units) : std::nullopt;
    const auto bytes = f32_bytes(count);
    if (!bytes || *bytes > kMaxLayerParamBytes)
      fail("weights " + format_dims(w) + " and bias would need " + need(bytes) +
           " of float32, more than the " + checked::format_bytes(kMaxLayerParamBytes) +
           " limit for one layer's parameters");
    s.params = *count;
    s.param_specs = {{l.name + ".weight", w}, {l.name + ".bias", {units}}};
  };
  switch (l.kind) {
    case LayerKind::conv2d: {
      need_image();
      s.stride_h = l.stride_h ? l.stride_h : 1;
      s.stride_w = l.stride_w ? l.stride_w : 1;
      const int64_t c = x[1];
      const int64_t oh = window_output_size(x[2], l.kernel_h, s.stride_h, l.padding, &s.pad_top);
      const int64_t ow = window_output_size(x[3], l.kernel_w, s.stride_w, l.padding, &s.pad_left);
      if (oh == 0 || ow == 0)
        fail("kernel " + pair(l.kernel_h, l.kernel_w) + " does not fit input " +
             format_dims(x) + " with padding " + std::string(padding_name(l.padding)));
      const std::vector<int64_t> w = {l.filters, c, l.kernel_h, l.kernel_w};  // OIHW
      std::optional<int64_t> weights = checked::mul(l.filters, c);
      if (weights) weights = checked::mul(*weights, l.kernel_h);
      if (weights) weights = checked::mul(*weights, l.kernel_w);
      weights_and_bias(w, weights, l.filters);
      s.output = {1, l.filters, oh, ow};
      break;
    }
    case LayerKind::maxpool2d: {
      need_image();
      s.stride_h = l.stride_h ? l.stride_h : l.pool_h;
      s.stride_w = l.stride_w ? l.stride_w : l.pool_w;
      const int64_t oh = window_output_size(x[2], l.pool_h, s.stride_h, Padding::valid);
      const int64_t ow = window_output_size(x[3], l.pool_w, s.stride_w, Padding::valid);
      if (oh == 0 || ow == 0)
        fail("pool " + pair(l.pool_h, l.pool_w) + " does not fit input " + format_dims(x));
      s.output = {1, x[1], oh, ow};
      break;
    }
    case LayerKind::flatten:
      // (1, C, H, W) -> (1, C*H*W) in C, H, W order, as PyTorch's Flatten (Keras
      // flattens H, W, C). The product fits: the input passed the activation bound.
      s.output = x.size() == 4 ? std::vector<int64_t>{1, x[1] * x[2] * x[3]} : x;
      break;
    case LayerKind::dense: {
      need_flat();
      const std::vector<int64_t> w = {l.units, x[1]};  // (out, in)
      weights_and_bias(w, checked::mul(l.units, x[1]), l.units);
      s.output = {1, l.units};
      break;
    }
    case LayerKind::softmax:
      need_flat();
      s.output = x;
      break;
    case LayerKind::dropout:
    case LayerKind::relu:
      s.output = x;
      break;
  }

  std::optional<int64_t> elements = int64_t{1};
  for (int64_t d : s.output) elements = elements ? checked::mul(*elements, d) : std::nullopt;
  const auto act_bytes = f32_bytes(elements);
  if (!act_bytes || *act_bytes > kMaxActivationBytesPerSample)
    fail("output " + format_dims(s.output) + " would need " + need(act_bytes) +
         " of float32 per sample, more than the " +
         checked::format_bytes(kMaxActivationBytesPerSample) + " limit for one activation");

  // FLOPs: 2 per multiply-accumulate of conv and dense. Bias adds, activations, pooling
  // comparisons and dropout are not counted (the usual convention for "MFLOPs").
  if (l.kind == LayerKind::conv2d || l.kind == LayerKind::dense) {
    const int64_t weights = s.params - s.output[1];  // K*C*R*S or out*in
    const int64_t positions = *elements / s.output[1];  // oh*ow, or 1 for dense
    std::optional<int64_t> flops = checked::mul(weights, positions);
    if (flops) flops = checked::mul(*flops, int64_t{2});
    if (!flops) fail("forward FLOP count overflows 64 bits");
    s.flops = *flops;
  }
  const auto params = checked::add(model.total_params, s.params);
  const auto flops = checked::add(model.total_flops, s.flops);
  if (!params || !flops) fail("the model's parameter or FLOP total overflows 64 bits");
  model.layers.push_back(std::move(s));  // nothing changed before this line
  model.total_params = *params;
  model.total_flops = *flops;
}

}  // namespace brigade::model

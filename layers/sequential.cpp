#include "layers/sequential.h"

#include <algorithm>
#include <sstream>

#include "kernels/ops.h"

namespace brigade::layers {

namespace {
// Keras' input_shape (H, W, C) or (F) as a per-sample NCHW shape (1, C, H, W) or (1, F).
std::vector<int64_t> per_sample_input(const std::vector<int64_t>& keras, const std::string& who) {
  if (keras.size() == 3) return {1, keras[2], keras[0], keras[1]};
  if (keras.size() == 1) return {1, keras[0]};
  throw Error(who + ": input_shape " + model::format_dims(keras) +
              " must be (H, W, C) or (F)");
}
}  // namespace

Sequential& Sequential::add(const LayerDef& def) {
  model::LayerSpec spec = def.spec;
  const std::string kind(model::kind_name(spec.kind));
  if (spec.name.empty()) {
    spec.name = kind + "_" + std::to_string(kind_count_[static_cast<size_t>(spec.kind)] + 1);
  }
  if (!def.input_shape.empty()) {
    const std::vector<int64_t> input = per_sample_input(def.input_shape, spec.name);
    if (modules_.empty()) {
      spec_.input = input;
    } else {
      const std::vector<int64_t>& current = shapes_.layers.back().output;
      BRIGADE_CHECK(input == current, spec.name << ": input_shape " << model::format_dims(input)
                                                << " differs from the previous layer's output "
                                                << model::format_dims(current));
    }
  }
  BRIGADE_CHECK(!spec_.input.empty(), spec.name << ": the first layer needs an input_shape, "
                                                << "e.g. Conv2D(32, {3, 3}, \"relu\", {28, 28, 1})");
  add_spec(std::move(spec), DeviceScope::current());
  return *this;
}

// O(1) per layer: the new layer's shapes come from the previous layer's output alone, and the
// model's vectors grow in place (copying the layer list and inferring every shape again at
// each add made building an n-layer model O(n^2): 73 s for 10,000 layers).
void Sequential::add_spec(model::LayerSpec spec, Device device) {
  // Device blocks numbered by first appearance.
  auto it = std::find(devices_.begin(), devices_.end(), device);
  spec.device = static_cast<int>(it - devices_.begin());
  const size_t index = spec_.layers.size();
  try {
    if (index == 0) model::check_input_shape(spec_.input);
    // The one place shapes are checked; on a throw shapes_ is unchanged.
    model::append_layer_shape(shapes_, spec_.input, index ? &spec_.layers.back() : nullptr,
                              spec, index);
  } catch (const model::ShapeError& e) {
    throw Error(e.what());
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  std::unique_ptr<Module> module;
  try {
    module = make_module(spec, shapes_.layers.back(), device, static_cast<uint32_t>(index), seed_);
  } catch (...) {
    shapes_.total_params -= shapes_.layers.back().params;
    shapes_.total_flops -= shapes_.layers.back().flops;
    shapes_.layers.pop_back();
    throw;
  }
  // Nothing above changed the model: commit now.
  if (it == devices_.end()) devices_.push_back(device);
  ++kind_count_[static_cast<size_t>(spec.kind)];
  spec_.layers.push_back(std::move(spec));
  spec_.device_count = static_cast<int>(devices_.size());
  modules_.push_back(std::move(module));
}

std::unique_ptr<Sequential> Sequential::from_spec(const model::ModelSpec& spec,
                                                  const std::vector<Device>& devices,
                                                  uint64_t seed) {
  std::vector<Device> layer_devices;
  layer_devices.reserve(spec.layers.size());
  for (const model::LayerSpec& l : spec.layers) {
    BRIGADE_CHECK(l.device >= 0 && static_cast<size_t>(l.device) < devices.size(),
                  l.name << " is in device block " << l.device << " but only " << devices.size()
                         << " devices were given");
    layer_devices.push_back(devices[static_cast<size_t>(l.device)]);
  }
  return placed(spec, layer_devices, seed);
}

std::unique_ptr<Sequential> Sequential::placed(const model::ModelSpec& spec,
                                               const std::vector<Device>& layer_devices,
                                               uint64_t seed) {
  BRIGADE_CHECK(layer_devices.size() == spec.layers.size(),
                layer_devices.size() << " layer devices for a model of " << spec.layers.size()
                                     << " layers");
  auto model = std::make_unique<Sequential>(seed);
  model->spec_.input = spec.input;
  model->spec_.layers.reserve(spec.layers.size());
  model->shapes_.layers.reserve(spec.layers.size());
  model->modules_.reserve(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    model::LayerSpec copy = spec.layers[i];
    copy.line = 0;  // the C++ form has no lines; keep specs comparable
    model->add_spec(copy, layer_devices[i]);
  }
  return model;
}

std::vector<Parameter*> Sequential::parameters(size_t begin, size_t end) {
  std::vector<Parameter*> out;
  for (size_t i = begin; i < std::min(end, modules_.size()); ++i)
    for (Parameter* p : modules_[i]->parameters()) out.push_back(p);
  return out;
}

void Sequential::zero_grad(size_t begin, size_t end) {
  for (Parameter* p : parameters(begin, end)) ops::fill(p->grad, 0.0f, p->grad.stream());
}

Tensor Sequential::forward(const Tensor& x, ForwardContext& ctx, size_t begin, size_t end) {
  end = std::min(end, modules_.size());
  BRIGADE_CHECK(begin < end, "Sequential::forward: empty layer range [" << begin << ", " << end
                                                                         << ") of a model of "
                                                                         << modules_.size()
                                                                         << " layers");
  Tensor h = x;
  bool input_relu = false;  // h is a ReLU's output whose mask layer i applies
  for (size_t i = begin; i < end; ++i) {
    Module& m = *modules_[i];
    h = to_device(h, ctx.stream_for(m.device()), ctx.tape);
    // Knowing both layers, hand a ReLU's mask to the next one where it can apply it
    // (module.h): when both record on this tape, on one device (no copy between them).
    const bool masked_by_next = ctx.tape && i + 1 < end &&
                                modules_[i + 1]->device() == m.device() &&
                                relu_mask_moves(m.spec(), modules_[i + 1]->spec());
    h = m.forward(h, ctx, {.masked_by_next = masked_by_next, .input_relu = input_relu});
    input_relu = masked_by_next;
  }
  return h;
}

Tensor Sequential::predict(const Tensor& x) {
  ForwardContext ctx;
  ctx.training = false;
  Tensor y = forward(x, ctx);
  const model::LayerSpec& last = spec_.layers.back();
  if (last.kind == model::LayerKind::dense && last.activation == model::Activation::softmax)
    y = ops::softmax_forward(y, ctx.stream_for(y.device()));
  return y;
}

std::string Sequential::summary() const {
  std::ostringstream os;
  for (size_t i = 0; i < modules_.size(); ++i) {
    const Module& m = *modules_[i];
    os << m.name() << "  " << m.device() << "  " << model::format_dims(m.shape().output) << "  "
       << m.shape().params << "\n";
  }
  os << "total parameters: " << shapes_.total_params << "\n";
  return os.str();
}

}  // namespace brigade::layers

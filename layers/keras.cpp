#include "layers/keras.h"

#include <string>

#include "engine/error.h"

namespace brigade::layers {

using model::Activation;
using model::LayerKind;

namespace {
Activation parse_activation(std::string_view a, std::string_view layer) {
  if (a.empty() || a == "linear") return Activation::none;
  if (a == "relu") return Activation::relu;
  if (a == "softmax") return Activation::softmax;
  throw Error(std::string(layer) + ": unknown activation \"" + std::string(a) +
              "\" (expected \"\", \"linear\", \"relu\" or \"softmax\")");
}

LayerDef def_of(LayerKind kind) {
  LayerDef d;
  d.spec.kind = kind;
  return d;
}

thread_local std::vector<Device> scope_stack;
}  // namespace

LayerDef& LayerDef::strides(int64_t s) {
  spec.stride_h = spec.stride_w = s;
  return *this;
}

LayerDef& LayerDef::padding(std::string_view p) {
  BRIGADE_CHECK(p == "valid" || p == "same",
                model::kind_name(spec.kind) << ": padding must be \"valid\" or \"same\", got \""
                                            << p << "\"");
  spec.padding = p == "same" ? model::Padding::same : model::Padding::valid;
  return *this;
}

LayerDef& LayerDef::name(std::string n) {
  spec.name = std::move(n);
  return *this;
}

LayerDef Conv2D(int64_t filters, Pair kernel_size, std::string_view activation,
                std::vector<int64_t> input_shape) {
  LayerDef d = def_of(LayerKind::conv2d);
  d.spec.filters = filters;
  d.spec.kernel_h = kernel_size.first;
  d.spec.kernel_w = kernel_size.second;
  d.spec.activation = parse_activation(activation, "conv2d");
  d.input_shape = std::move(input_shape);
  return d;
}

LayerDef MaxPooling2D(Pair pool_size) {
  LayerDef d = def_of(LayerKind::maxpool2d);
  d.spec.pool_h = pool_size.first;
  d.spec.pool_w = pool_size.second;
  return d;
}

LayerDef Dropout(double rate) {
  LayerDef d = def_of(LayerKind::dropout);
  d.spec.rate = rate;
  return d;
}

LayerDef Flatten() { return def_of(LayerKind::flatten); }

LayerDef Dense(int64_t units, std::string_view activation, std::vector<int64_t> input_shape) {
  LayerDef d = def_of(LayerKind::dense);
  d.spec.units = units;
  d.spec.activation = parse_activation(activation, "dense");
  d.input_shape = std::move(input_shape);
  return d;
}

LayerDef ReLU() { return def_of(LayerKind::relu); }
LayerDef Softmax() { return def_of(LayerKind::softmax); }

DeviceScope::DeviceScope(Device device) { scope_stack.push_back(device); }
DeviceScope::~DeviceScope() { scope_stack.pop_back(); }
Device DeviceScope::current() { return scope_stack.empty() ? Device::cpu(0) : scope_stack.back(); }

}  // namespace brigade::layers

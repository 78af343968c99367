// Sequential: a stack of modules, built the Keras way (add) or from a model file (ModelSpec).
//
// add() infers the new layer's shapes at once (one step of infer_shapes, the one place shapes
// are checked, on the previous layer's output: building a model is linear in its layers) and
// rejects a layer that does not fit with its name and both shapes, e.g. "conv2d_3: kernel
// (3, 3) does not fit input (1, 64, 2, 2) with padding valid". Nothing is added when add()
// throws.
//
// Placement. Each layer lives on a device: the DeviceScope's at add() time (keras.h); from a
// ModelSpec, devices[K] for the layers of block `device K` (from_spec), or the device a
// pipeline's plan gives each layer (placed). Device blocks are numbered by first appearance,
// so the C++ and the model-file forms of the question's network give the same ModelSpec
// (spec()).
//
// Stages. forward(x, ctx, begin, end) runs the contiguous range [begin, end) of layers: a
// pipeline stage runs its range on one micro-batch with a Tape of its own in ctx, and later
// calls tape.backward_input / backward_params (tape.h). When consecutive layers sit on
// different devices, the activation is copied across (and the gradient back) in stream order.
// Within a range, on one device, a ReLU's mask is handed to the layer after it where that one
// applies it more cheaply (module.h, ReluHandoff); never across a range's end.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "layers/keras.h"
#include "layers/model/model_file.h"
#include "layers/module.h"
#include "layers/tape.h"

namespace brigade::layers {

class Sequential {
 public:
  static constexpr size_t npos = std::numeric_limits<size_t>::max();

  explicit Sequential(uint64_t seed = 0) : seed_(seed) {}

  Sequential& add(const LayerDef& def);

  // The model of a model file: block K of `spec` on devices[K] (devices must cover every
  // block), parameters from `seed`.
  static std::unique_ptr<Sequential> from_spec(const model::ModelSpec& spec,
                                               const std::vector<Device>& devices,
                                               uint64_t seed = 0);
  // The same layers with layer i on layer_devices[i], whatever blocks the spec names (a
  // pipeline's cut, pipeline/runtime/partition.h's layer_devices).
  static std::unique_ptr<Sequential> placed(const model::ModelSpec& spec,
                                            const std::vector<Device>& layer_devices,
                                            uint64_t seed = 0);

  size_t size() const { return modules_.size(); }
  Module& layer(size_t i) { return *modules_.at(i); }
  const Module& layer(size_t i) const { return *modules_.at(i); }
  const model::ModelSpec& spec() const { return spec_; }
  const model::ModelShapes& shapes() const { return shapes_; }
  const std::vector<Device>& devices() const { return devices_; }  // block K -> device
  int64_t parameter_count() const { return shapes_.total_params; }

  // Every parameter of layers [begin, end), in layer order (weight, then bias).
  std::vector<Parameter*> parameters(size_t begin = 0, size_t end = npos);
  // Sets every gradient of layers [begin, end) to zero (on the parameters' streams).
  void zero_grad(size_t begin = 0, size_t end = npos);

  // Layers [begin, end) on x (N, ...); the input is moved to the first layer's device.
  Tensor forward(const Tensor& x, ForwardContext& ctx, size_t begin = 0, size_t end = npos);
  // Evaluation of the whole model: no tape, no dropout; if the last layer is a Dense with
  // the softmax activation, its logits are turned into probabilities.
  Tensor predict(const Tensor& x);

  // One line per layer: name, device, output shape, parameters; then the total.
  std::string summary() const;

 private:
  void add_spec(model::LayerSpec spec, Device device);

  uint64_t seed_;
  model::ModelSpec spec_;
  model::ModelShapes shapes_;
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::array<int, 7> kind_count_{};  // layers of each LayerKind so far (add()'s default names)
};

}  // namespace brigade::layers

// The Keras-named layer constructors and DeviceScope: how a model is written in C++,
// the way the question writes it in Keras.
//
//   Sequential model(/*seed=*/42);
//   {
//     DeviceScope on(Device::parse("cpu:0"));          // with tf.device('/gpu:0'):
//     model.add(Conv2D(32, {3, 3}, "relu", {28, 28, 1}));
//     model.add(MaxPooling2D({2, 2}));
//   }
//   { DeviceScope on(Device::parse("cpu:1")); model.add(Dropout(0.25)); model.add(Flatten());
//     model.add(Dense(10, "softmax")); }
//
// Each constructor returns a LayerDef: the LayerSpec (layers/model/layer_spec.h) the call
// describes, plus Keras' optional input_shape (H, W, C) for the first layer. Strides and
// padding are set with .strides(s) / .padding("same"). Activations: "", "linear", "relu",
// "softmax" (on Dense: logits out, softmax fused into the loss; see module.h).
//
// DeviceScope is a guard: layers added while it lives (on this thread) are placed on its
// device; scopes nest, the innermost wins; outside any scope layers go to cpu:0.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "layers/model/layer_spec.h"

namespace brigade::layers {

struct LayerDef {
  model::LayerSpec spec;
  std::vector<int64_t> input_shape;  // Keras' (H, W, C) or (F); empty when not given

  LayerDef& strides(int64_t s);
  LayerDef& padding(std::string_view p);  // "valid" or "same"
  LayerDef& name(std::string n);          // default: conv2d_1, dense_2, ...
};

using Pair = std::pair<int64_t, int64_t>;

LayerDef Conv2D(int64_t filters, Pair kernel_size, std::string_view activation = "",
                std::vector<int64_t> input_shape = {});
LayerDef MaxPooling2D(Pair pool_size = {2, 2});
LayerDef Dropout(double rate);
LayerDef Flatten();
LayerDef Dense(int64_t units, std::string_view activation = "",
               std::vector<int64_t> input_shape = {});
LayerDef ReLU();
LayerDef Softmax();

class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  // The innermost live scope's device on this thread, or cpu:0.
  static Device current();
};

}  // namespace brigade::layers

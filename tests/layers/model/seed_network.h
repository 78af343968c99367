// The question's network (issue 3), written out by hand as LayerSpecs, and its shapes from
// the table: the oracle that both the shape inference and the model file are
// compared with.
#pragma once

#include <cstdint>
#include <vector>

#include "layers/model/layer_spec.h"

namespace brigade::model::test {

inline LayerSpec conv(int64_t filters, int device) {
  LayerSpec l;
  l.kind = LayerKind::conv2d;
  l.filters = filters;
  l.kernel_h = l.kernel_w = 3;
  l.activation = Activation::relu;
  l.device = device;
  return l;
}
inline LayerSpec pool(int device) {
  LayerSpec l;
  l.kind = LayerKind::maxpool2d;
  l.pool_h = l.pool_w = 2;
  l.device = device;
  return l;
}
inline LayerSpec dropout(double rate, int device) {
  LayerSpec l;
  l.kind = LayerKind::dropout;
  l.rate = rate;
  l.device = device;
  return l;
}
inline LayerSpec flatten(int device) {
  LayerSpec l;
  l.kind = LayerKind::flatten;
  l.device = device;
  return l;
}
inline LayerSpec dense(int64_t units, Activation activation, int device) {
  LayerSpec l;
  l.kind = LayerKind::dense;
  l.units = units;
  l.activation = activation;
  l.device = device;
  return l;
}

// Keras: device 0: Conv2D(32) Conv2D(64) MaxPool; device 1: Conv2D(128) MaxPool Conv2D(64)
// MaxPool; device 2: Dropout(0.25) Flatten Dense(1500, relu) Dropout(0.5) Dense(10, softmax).
inline std::vector<LayerSpec> seed_layers() {
  std::vector<LayerSpec> layers = {
      conv(32, 0),  conv(64, 0), pool(0),
      conv(128, 1), pool(1),     conv(64, 1), pool(1),
      dropout(0.25, 2), flatten(2), dense(1500, Activation::relu, 2), dropout(0.5, 2),
      dense(10, Activation::softmax, 2),
  };
  assign_default_names(layers);
  return layers;
}

inline const std::vector<int64_t> kSeedInput = {1, 1, 28, 28};

// Issue 3's table, per layer, in NCHW: 26x26x32 -> 24x24x64 -> 12x12x64 -> 10x10x128 ->
// 5x5x128 -> 3x3x64 -> 1x1x64 -> (dropout) -> 64 -> 1500 -> (dropout) -> 10.
inline const std::vector<std::vector<int64_t>> kSeedOutputs = {
    {1, 32, 26, 26}, {1, 64, 24, 24}, {1, 64, 12, 12}, {1, 128, 10, 10}, {1, 128, 5, 5},
    {1, 64, 3, 3},   {1, 64, 1, 1},   {1, 64, 1, 1},   {1, 64},          {1, 1500},
    {1, 1500},       {1, 10},
};

}  // namespace brigade::model::test

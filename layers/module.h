// Module: one layer of a Sequential, with its parameters, placed on one device.
//
// A module is made from a LayerSpec (layers/model/layer_spec.h: what the Keras call or the model
// file said) and its LayerShape (the per-sample shapes shape inference found), so that every
// size check lives in one place, infer_shapes(). forward() checks only that the batch it is
// given has the per-sample shape the model was built for.
//
// The kinds (make_module):
//   conv2d     Conv2D, bias, optional fused ReLU          params <name>.weight (K, C, R, S),
//                                                                <name>.bias (K)
//   maxpool2d  MaxPooling2D ("valid"; ties: first maximum)
//   dropout    inverted dropout, Philox mask of (seed, step, layer index, sample, element);
//              identity when ctx.training is false
//   flatten    a view (N, C, H, W) -> (N, C·H·W), PyTorch's C, H, W order
//   dense      Dense, bias, optional fused ReLU           params <name>.weight (out, in),
//                                                                <name>.bias (out)
//   relu, softmax  standalone activations
//
// Dense(units, "softmax") outputs LOGITS, not probabilities: training fuses the softmax into
// the loss (ops::softmax_cross_entropy, numerically stable and cheaper), as
// Keras' from_logits=True would. Sequential::predict applies the softmax for evaluation. A
// standalone Softmax layer (kind softmax) does apply it, forward and backward.
//
// Weights are Glorot-uniform (Keras' default) and biases zero, drawn from Philox4x32-10 as a
// pure function of (seed, layer index, element) (init.h): the same seed gives the same
// model on every device and in every build order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "layers/model/layer_spec.h"
#include "layers/tape.h"

namespace brigade::layers {

// Who applies a ReLU's mask (dy where y > 0) in the backward. By default the layer whose output
// goes through the ReLU: a ReLU layer, or a Conv2D/Dense with activation "relu". That is a
// pass over the layer's whole output; a max-pool or a convolution right after it can apply the
// same mask in a pass it makes anyway, with the same bits (module.cpp says why): the max-pool
// by its own output (a quarter of the size for a 2x2 pool, and the ReLU's output is then freed
// after the forward), the convolution as it writes its input gradient. Sequential, which knows
// both layers (relu_mask_moves), tells each at forward time:
struct ReluHandoff {
  bool masked_by_next = false;  // this layer's ReLU: the next layer applies its mask
  bool input_relu = false;      // this layer's input is a ReLU's output: apply its mask here
};

// True when `next`, run right after `layer` on its output, can apply the mask of `layer`'s
// ReLU in its own backward.
bool relu_mask_moves(const model::LayerSpec& layer, const model::LayerSpec& next);

class Module {
 public:
  Module(model::LayerSpec spec, model::LayerShape shape, Device device, uint32_t index)
      : spec_(std::move(spec)), shape_(std::move(shape)), device_(device), index_(index) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return spec_.name; }
  const model::LayerSpec& spec() const { return spec_; }
  const model::LayerShape& shape() const { return shape_; }  // per sample, N = 1
  Device device() const { return device_; }
  uint32_t index() const { return index_; }  // position in the model (dropout masks)

  std::vector<Parameter*> parameters();

  // x: (N, ...) with the per-sample shape shape().input, on device(). Runs on
  // ctx.stream_for(device()); records a node on ctx.tape if there is one (none for a ReLU
  // layer whose mask the next layer applies).
  Tensor forward(const Tensor& x, ForwardContext& ctx, ReluHandoff relu = {});

 protected:
  virtual Tensor run(const Tensor& x, const Stream& stream, ForwardContext& ctx,
                     ReluHandoff relu) = 0;
  std::vector<Parameter> params_;

 private:
  model::LayerSpec spec_;
  model::LayerShape shape_;
  Device device_;
  uint32_t index_;
};

// The module of `spec` (with its inferred `shape`) on `device`, parameters initialised from
// `seed`. `index` is the layer's position in the model.
std::unique_ptr<Module> make_module(const model::LayerSpec& spec, const model::LayerShape& shape,
                                    Device device, uint32_t index, uint64_t seed);

}  // namespace brigade::layers

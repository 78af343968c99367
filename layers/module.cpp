// The modules of module.h and their tape nodes: each layer's forward next to the node that
// holds what its backward needs.
#include "layers/module.h"

#include "kernels/ops.h"
#include "kernels/precision.h"
#include "layers/bf16_boundary.h"
#include "layers/init.h"

namespace brigade::layers {

using model::Activation;
using model::LayerKind;

namespace {
bool has_relu_output(const model::LayerSpec& l) {
  return l.kind == LayerKind::relu ||
         ((l.kind == LayerKind::conv2d || l.kind == LayerKind::dense) &&
          l.activation == Activation::relu);
}
bool can_mask_relu_input(const model::LayerSpec& l) {
  return l.kind == LayerKind::maxpool2d || l.kind == LayerKind::conv2d;
}
}  // namespace

// Why the bits are the same. A convolution masks the input gradient it writes: the same test
// (y > 0) on the same values, y being its input. A max-pool masks its output gradient by its
// own output: a window's winner is an element y of the ReLU's output and the window's output
// is that y, so "y > 0" is the same test; every other input element receives 0 either way, and
// an element won by several windows gets their gradients masked alike, added in the same order.
bool relu_mask_moves(const model::LayerSpec& layer, const model::LayerSpec& next) {
  return has_relu_output(layer) && can_mask_relu_input(next);
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (Parameter& p : params_) out.push_back(&p);
  return out;
}

Tensor Module::forward(const Tensor& x, ForwardContext& ctx, ReluHandoff relu) {
  BRIGADE_CHECK(x.defined() && x.device() == device_,
                name() << ": input " << x.str() << " is not on the layer's device " << device_);
  // The per-sample shape the model was built for: (1, C, H, W) or (1, F).
  const std::vector<int64_t>& want = shape_.input;
  std::vector<int64_t> got = x.shape().dims();
  bool fits = got.size() == want.size() && !got.empty() && got[0] >= 1;
  for (size_t i = 1; fits && i < got.size(); ++i) fits = got[i] == want[i];
  BRIGADE_CHECK(fits, name() << ": input " << x.shape() << " does not match the layer's input "
                             << model::format_dims(want) << " (N, ...)");
  BRIGADE_CHECK((!relu.masked_by_next || has_relu_output(spec_)) &&
                    (!relu.input_relu || can_mask_relu_input(spec_)),
                name() << ": a ReLU's mask handed to or from a layer that cannot apply it");
  const Stream stream = ctx.stream_for(device_);
  const size_t recorded = ctx.tape ? ctx.tape->size() : 0;
  Tensor y = run(x, stream, ctx, relu);
  if (precision() == Precision::bf16) {  // a layer boundary: bf16 values (bf16_boundary.h)
    y = round_at_boundary(y, x, stream);
    if (ctx.tape && ctx.tape->size() > recorded) round_input_gradient_of_last(*ctx.tape, stream);
  }
  return y;
}

namespace {

Shape batch_of(int64_t n, const std::vector<int64_t>& per_sample) {
  std::vector<int64_t> dims = per_sample;
  dims[0] = n;
  return Shape(dims);
}

Parameter make_param(const model::ParamSpec& spec, std::vector<float> values, Device device) {
  const Shape shape(spec.shape);
  Stream s = Stream::default_for(device);
  return Parameter{spec.name, Tensor::from_vector(values, shape, s), Tensor::zeros(shape, s)};
}

// ---- Conv2D and Dense: a weighted op with an optional fused ReLU --------------------------

// What both halves of a Conv2D/Dense backward need: dy', the gradient before the fused
// ReLU (dy where y > 0, unless the next layer applies that mask), computed by whichever half
// runs first. And the weights as the forward read them (ops::dense_weights, conv2d_weights: in
// precision bf16 on a GPU, narrowed or rounded once for the forward and the backward-data of
// this micro-batch; the parameter itself otherwise), which the input gradient reads too: the
// parameters change only in the update, after every micro-batch's backward. Likewise x is the
// input as the forward read it (ops::dense_operand, conv2d_operand), which the weight gradient
// reads too: made once for both; and dy' as the GEMMs of both halves read it
// (ops::dense_operand, conv2d_operand), made once by whichever half runs first.
class WeightedNode : public Node {
 public:
  WeightedNode(std::string name, Tensor x, Tensor y, bool relu, Tensor w_read, Parameter* w,
               Parameter* b, Stream stream)
      : name_(std::move(name)), x_(std::move(x)), w_read_(std::move(w_read)), relu_(relu), w_(w),
        b_(b), stream_(std::move(stream)) {
    if (relu_) y_ = std::move(y);
  }
  std::string name() const override { return name_; }
  bool has_params() const override { return true; }

 protected:
  const Tensor& pre_activation_grad(const Tensor& dy) {
    if (!dpre_.defined()) dpre_ = relu_ ? ops::relu_backward(y_, dy, stream_) : dy;
    return dpre_;
  }
  const Tensor& pre_activation_grad_gemm(const Tensor& dy) {
    if (!dpre_gemm_.defined()) dpre_gemm_ = gemm_operand(pre_activation_grad(dy));
    return dpre_gemm_;
  }
  // t as the layer's GEMMs read it (ops::dense_operand or conv2d_operand).
  virtual Tensor gemm_operand(const Tensor& t) const = 0;
  std::string name_;
  Tensor x_, y_, dpre_;  // x_ as the ops read it; y_ kept for the ReLU's mask only
  Tensor dpre_gemm_;     // dpre_ as the ops read it
  Tensor w_read_;        // the weights the forward read; the input gradient reads them
  bool relu_;            // apply the fused ReLU's mask
  Parameter* w_;
  Parameter* b_;
  Stream stream_;
};

class ConvNode : public WeightedNode {
 public:
  // relu_x, when defined: the layer's input (float32), a ReLU's output, and the input gradient
  // goes through its mask in the pass that writes it (ReluHandoff).
  ConvNode(std::string name, Tensor x, Tensor y, bool relu, Tensor w_read, Parameter* w,
           Parameter* b, Stream stream, ops::Conv2dArgs args, Tensor relu_x)
      : WeightedNode(std::move(name), std::move(x), std::move(y), relu, std::move(w_read), w, b,
                     std::move(stream)),
        args_(args), relu_x_(std::move(relu_x)) {}
  Tensor backward_input(const Tensor& dy) override {
    return ops::conv2d_backward_data(pre_activation_grad_gemm(dy), w_read_, x_.shape(), args_,
                                     stream_, relu_x_, boundary_rounding());
  }
  void backward_params(const Tensor& dy) override {
    ops::conv2d_backward_params(x_, pre_activation_grad(dy), w_->grad, b_->grad, args_, stream_,
                                pre_activation_grad_gemm(dy));
  }

 private:
  Tensor gemm_operand(const Tensor& t) const override { return ops::conv2d_operand(t, stream_); }
  ops::Conv2dArgs args_;
  Tensor relu_x_;
};

class DenseNode : public WeightedNode {
 public:
  using WeightedNode::WeightedNode;
  Tensor backward_input(const Tensor& dy) override {
    return ops::dense_backward_data(pre_activation_grad_gemm(dy), w_read_, stream_,
                                    boundary_rounding());
  }
  void backward_params(const Tensor& dy) override {
    ops::dense_backward_params(x_, pre_activation_grad(dy), w_->grad, b_->grad, stream_,
                               pre_activation_grad_gemm(dy));
  }

 private:
  Tensor gemm_operand(const Tensor& t) const override { return ops::dense_operand(t, stream_); }
};

class Conv2DModule : public Module {
 public:
  Conv2DModule(const model::LayerSpec& spec, const model::LayerShape& shape, Device device,
               uint32_t index, uint64_t seed)
      : Module(spec, shape, device, index) {
    BRIGADE_CHECK(shape.stride_h == shape.stride_w,
                  spec.name << ": strides " << shape.stride_h << "x" << shape.stride_w
                            << " differ; the kernels take one stride for both directions");
    args_.stride = shape.stride_h;
    args_.padding = spec.padding;
    const auto& w = shape.param_specs[0].shape;  // (K, C, R, S)
    params_.push_back(make_param(shape.param_specs[0],
                                 glorot_uniform(w[0] * w[1] * w[2] * w[3], w[1] * w[2] * w[3],
                                                w[0] * w[2] * w[3], seed, index),
                                 device));
    params_.push_back(make_param(shape.param_specs[1], std::vector<float>(w[0], 0.0f), device));
  }

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff handoff) override {
    const bool relu = spec().activation == Activation::relu;
    const Tensor w = ops::conv2d_weights(params_[0].value, s);  // (K, C, R, S), as the ops read it
    const Tensor xo = ops::conv2d_operand(x, s);                  // (N, C, H, W), likewise
    Tensor y = ops::conv2d_forward(xo, w, params_[1].value, args_, relu, s, boundary_rounding());
    if (ctx.tape)
      ctx.tape->record(std::make_unique<ConvNode>(name(), xo, y, relu && !handoff.masked_by_next,
                                                  w, &params_[0], &params_[1], s, args_,
                                                  handoff.input_relu ? x : Tensor()));
    return y;
  }

 private:
  ops::Conv2dArgs args_;
};

class DenseModule : public Module {
 public:
  DenseModule(const model::LayerSpec& spec, const model::LayerShape& shape, Device device,
              uint32_t index, uint64_t seed)
      : Module(spec, shape, device, index) {
    const auto& w = shape.param_specs[0].shape;  // (out, in)
    params_.push_back(make_param(shape.param_specs[0],
                                 glorot_uniform(w[0] * w[1], w[1], w[0], seed, index), device));
    params_.push_back(make_param(shape.param_specs[1], std::vector<float>(w[0], 0.0f), device));
  }

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff handoff) override {
    // Activation::softmax: logits out, the softmax lives in the loss (module.h).
    const bool relu = spec().activation == Activation::relu;
    const Tensor w = ops::dense_weights(params_[0].value, s);  // (out, in), as the ops read it
    const Tensor xo = ops::dense_operand(x, s);                  // (N, in), likewise
    Tensor y = ops::dense_forward(xo, w, params_[1].value, relu, s, boundary_rounding());
    if (ctx.tape)
      ctx.tape->record(std::make_unique<DenseNode>(name(), xo, y, relu && !handoff.masked_by_next,
                                                   w, &params_[0], &params_[1], s));
    return y;
  }
};

// ---- Layers without parameters -------------------------------------------------------------

// A node whose backward is one function of dy and what the forward left behind.
template <class Backward>
class LambdaNode : public Node {
 public:
  LambdaNode(std::string name, Backward backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  Tensor backward_input(const Tensor& dy) override { return backward_(dy); }

 private:
  std::string name_;
  Backward backward_;
};

template <class Backward>
void record(ForwardContext& ctx, const std::string& name, Backward backward) {
  if (ctx.tape) ctx.tape->record(std::make_unique<LambdaNode<Backward>>(name, std::move(backward)));
}

// A max-pool's backward; when its input is a ReLU's output (ReluHandoff), it also applies that
// ReLU's backward, by masking dy with its own output.
class MaxPoolNode : public Node {
 public:
  MaxPoolNode(std::string name, ops::PoolResult fwd, ops::Pool2dArgs args, Stream stream,
              bool relu_mask)
      : name_(std::move(name)), fwd_(std::move(fwd)), args_(args), stream_(std::move(stream)),
        relu_mask_(relu_mask) {
    // The output y is the mask's test; otherwise only cuDNN's backward reads it (and x).
    if (!relu_mask_ && !fwd_.x.defined()) fwd_.y = Tensor();
  }
  std::string name() const override { return name_; }
  Tensor backward_input(const Tensor& dy) override {
    // y is (N, C, P, Q), like dy: a quarter of the input's size for a 2x2 pool.
    return ops::maxpool2d_backward(dy, fwd_, args_, stream_, relu_mask_ ? fwd_.y : Tensor(),
                                   boundary_rounding());
  }

 private:
  std::string name_;
  ops::PoolResult fwd_;  // y kept while the ReLU mask or cuDNN needs it
  ops::Pool2dArgs args_;
  Stream stream_;
  bool relu_mask_;
};

class MaxPool2DModule : public Module {
 public:
  using Module::Module;

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff handoff) override {
    BRIGADE_CHECK(shape().stride_h == shape().stride_w,
                  name() << ": strides " << shape().stride_h << "x" << shape().stride_w
                         << " differ; the kernels take one stride for both directions");
    const ops::Pool2dArgs a{spec().pool_h, spec().pool_w, shape().stride_h};
    ops::PoolResult r = ops::maxpool2d_forward(x, a, s);
    Tensor y = r.y;
    if (ctx.tape)
      ctx.tape->record(
          std::make_unique<MaxPoolNode>(name(), std::move(r), a, s, handoff.input_relu));
    return y;
  }
};

class DropoutModule : public Module {
 public:
  using Module::Module;

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff) override {
    if (!ctx.training) return x;
    const float rate = static_cast<float>(spec().rate);
    const DropoutKey key{ctx.seed, ctx.step, index()};
    const int64_t offset = ctx.sample_offset;
    const Tensor step_word =
        ctx.step_word.defined() && ctx.step_word.device() == s.device() ? ctx.step_word : Tensor();
    const ops::Bf16Rounding round = boundary_rounding();
    Tensor y = ops::dropout_forward(x, rate, key, offset, s, step_word, round);
    record(ctx, name(), [rate, key, offset, s, step_word, round](const Tensor& dy) {
      return ops::dropout_backward(dy, rate, key, offset, s, step_word, round);
    });
    return y;
  }
};

class FlattenModule : public Module {
 public:
  using Module::Module;

 protected:
  Tensor run(const Tensor& x, const Stream&, ForwardContext& ctx, ReluHandoff) override {
    record(ctx, name(), [x_shape = x.shape()](const Tensor& dy) { return dy.reshape(x_shape); });
    return x.reshape(batch_of(x.shape()[0], shape().output));
  }
};

// A standalone ReLU. When the next layer applies its mask (ReluHandoff), its backward is the
// identity, and it records nothing.
class ReLUModule : public Module {
 public:
  using Module::Module;

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff handoff) override {
    Tensor y = ops::relu_forward(x, s);
    if (!handoff.masked_by_next)
      record(ctx, name(), [y, s](const Tensor& dy) { return ops::relu_backward(y, dy, s); });
    return y;
  }
};

class SoftmaxModule : public Module {
 public:
  using Module::Module;

 protected:
  Tensor run(const Tensor& x, const Stream& s, ForwardContext& ctx, ReluHandoff) override {
    Tensor y = ops::softmax_forward(x, s);
    record(ctx, name(), [y, s](const Tensor& dy) { return ops::softmax_backward(y, dy, s); });
    return y;
  }
};

}  // namespace

std::unique_ptr<Module> make_module(const model::LayerSpec& spec, const model::LayerShape& shape,
                                    Device device, uint32_t index, uint64_t seed) {
  switch (spec.kind) {
    case LayerKind::conv2d: return std::make_unique<Conv2DModule>(spec, shape, device, index, seed);
    case LayerKind::dense: return std::make_unique<DenseModule>(spec, shape, device, index, seed);
    case LayerKind::maxpool2d: return std::make_unique<MaxPool2DModule>(spec, shape, device, index);
    case LayerKind::dropout: return std::make_unique<DropoutModule>(spec, shape, device, index);
    case LayerKind::flatten: return std::make_unique<FlattenModule>(spec, shape, device, index);
    case LayerKind::relu: return std::make_unique<ReLUModule>(spec, shape, device, index);
    case LayerKind::softmax: return std::make_unique<SoftmaxModule>(spec, shape, device, index);
  }
  throw Error(spec.name + ": unknown layer kind");
}

}  // namespace brigade::layers

// See bf16_boundary.h.
#include "layers/bf16_boundary.h"

#include <memory>
#include <utility>

#include "kernels/ops.h"
#include "kernels/precision.h"

namespace brigade::layers {

ops::Bf16Rounding boundary_rounding() {
  return precision() == Precision::bf16 ? ops::Bf16Rounding::fused : ops::Bf16Rounding::none;
}

Tensor round_at_boundary(const Tensor& result, const Tensor& source, const Stream& stream) {
  if (result.holds_bf16_values()) return result;  // a view or a selection of bf16 values
  const Tensor out =
      result.storage() == source.storage() ? Tensor::empty(result.shape(), stream) : result;
  return ops::round_to_bf16(result, out, stream);
}

namespace {
// A layer's node whose input gradient is rounded to bf16 values; everything else is the
// layer's own node.
class RoundedInputGradient : public Node {
 public:
  RoundedInputGradient(std::unique_ptr<Node> node, Stream stream)
      : node_(std::move(node)), stream_(std::move(stream)) {}
  std::string name() const override { return node_->name(); }
  Tensor backward_input(const Tensor& dy) override {
    return round_at_boundary(node_->backward_input(dy), dy, stream_);
  }
  bool has_params() const override { return node_->has_params(); }
  void backward_params(const Tensor& dy) override { node_->backward_params(dy); }

 private:
  std::unique_ptr<Node> node_;
  Stream stream_;
};
}  // namespace

void round_input_gradient_of_last(Tape& tape, const Stream& stream) {
  tape.record(std::make_unique<RoundedInputGradient>(tape.take_last(), stream));
}

}  // namespace brigade::layers

#include "layers/tape.h"

#include "engine/event.h"

namespace brigade::layers {

void Tape::record(std::unique_ptr<Node> node) {
  BRIGADE_CHECK(!propagated_, "Tape: cannot record " << node->name()
                                                     << " after a backward half has run");
  nodes_.push_back(std::move(node));
}

std::unique_ptr<Node> Tape::take_last() {
  BRIGADE_CHECK(!propagated_ && !nodes_.empty(),
                "Tape: no node to take back (" << nodes_.size() << " recorded, "
                                               << (propagated_ ? "a backward half has run" : "no backward yet")
                                               << ")");
  std::unique_ptr<Node> node = std::move(nodes_.back());
  nodes_.pop_back();
  return node;
}

void Tape::propagate(const Tensor& dy) {
  BRIGADE_CHECK(dy.defined(), "Tape: the output gradient is an undefined tensor");
  if (propagated_) {
    BRIGADE_CHECK(dy.storage() == dy_storage_,
                  "Tape: backward_input and backward_params were given different output "
                  "gradients; both halves take the gradient w.r.t. the tape's output");
    return;
  }
  BRIGADE_CHECK(!nodes_.empty(), "Tape: backward on an empty tape (was the forward run with "
                                 "this tape in its context?)");
  propagated_ = true;
  dy_storage_ = dy.storage();
  // grads_[n-1] = dy; grads_[i-1] = node i's input gradient. Node 0's input gradient is the
  // tape's, computed by backward_input only.
  grads_.assign(nodes_.size(), Tensor());
  grads_.back() = dy;
  for (size_t i = nodes_.size() - 1; i > 0; --i) grads_[i - 1] = nodes_[i]->backward_input(grads_[i]);
}

Tensor Tape::backward_input(const Tensor& dy, bool need_input_grad) {
  BRIGADE_CHECK(!input_done_, "Tape: backward_input called twice on one micro-batch");
  propagate(dy);
  Tensor dx;
  if (need_input_grad) dx = nodes_.front()->backward_input(grads_.front());
  input_done_ = true;
  if (params_done_) release_all();
  else release_after_input();
  return dx;
}

void Tape::backward_params(const Tensor& dy) {
  BRIGADE_CHECK(!params_done_, "Tape: backward_params called twice on one micro-batch");
  propagate(dy);
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] && nodes_[i]->has_params()) nodes_[i]->backward_params(grads_[i]);
  params_done_ = true;
  if (input_done_) release_all();
  else release_after_params();
}

Tensor Tape::backward(const Tensor& dy, bool need_input_grad) {
  BRIGADE_CHECK(!propagated_, "Tape: backward after a backward half has run; use the halves");
  BRIGADE_CHECK(dy.defined(), "Tape: the output gradient is an undefined tensor");
  BRIGADE_CHECK(!nodes_.empty(), "Tape: backward on an empty tape (was the forward run with "
                                 "this tape in its context?)");
  propagated_ = true;
  Tensor g = dy;  // the gradient at node i's output
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (nodes_[i]->has_params()) nodes_[i]->backward_params(g);
    g = i > 0 || need_input_grad ? nodes_[i]->backward_input(g) : Tensor();
    nodes_[i].reset();
  }
  input_done_ = params_done_ = true;
  release_all();
  return g;
}

// After B only W remains: it needs the nodes with parameters and the gradients at their
// outputs; everything else goes.
void Tape::release_after_input() {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] && !nodes_[i]->has_params()) {
      nodes_[i].reset();
      grads_[i] = Tensor();
    }
}

// After W only B's last step remains: node 0's input gradient, from node 0 and grads_[0]
// (propagate computed every inner gradient already).
void Tape::release_after_params() {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    nodes_[i].reset();
    grads_[i] = Tensor();
  }
}

void Tape::release_all() {
  nodes_.clear();
  grads_.clear();
  dy_storage_.reset();
}

size_t Tape::live_nodes() const {
  size_t n = 0;
  for (const auto& node : nodes_) n += node ? 1 : 0;
  return n;
}

size_t Tape::live_gradients() const {
  size_t n = 0;
  for (const Tensor& g : grads_) n += g.defined() ? 1 : 0;
  return n;
}

Stream ForwardContext::stream_for(const Device& device) const {
  auto it = streams.find(device);
  return it != streams.end() ? it->second : Stream::default_for(device);
}

namespace {
// dst: a new tensor on `to`, a copy of src made after src's producer (its owner stream).
Tensor copy_onto(const Tensor& src, const Stream& to) {
  Event ready;
  ready.record(src.stream());
  to.wait(ready);
  Tensor dst = Tensor::empty(src.shape(), to);
  copy_async(dst, src, to);
  return dst;
}

class ToDeviceNode : public Node {
 public:
  ToDeviceNode(Stream from) : from_(std::move(from)) {}
  std::string name() const override { return "copy to another device"; }
  Tensor backward_input(const Tensor& dy) override { return copy_onto(dy, from_); }

 private:
  Stream from_;  // the source device's stream: where the gradient goes back
};
}  // namespace

Tensor to_device(const Tensor& x, const Stream& to, Tape* tape) {
  if (x.device() == to.device()) return x;
  Tensor y = copy_onto(x, to);
  if (tape) tape->record(std::make_unique<ToDeviceNode>(x.stream()));
  return y;
}

}  // namespace brigade::layers

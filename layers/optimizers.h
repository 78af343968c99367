// Optimizers over a set of parameters: SGD (momentum, dampening, Nesterov, weight decay) and
// Adam / AdamW, with PyTorch's update rules (kernels/reference/optimizers.h is the oracle).
//
//   SGD opt(model.parameters(), {.lr = 0.05f, .momentum = 0.9f});
//   ... forward, loss, backward halves ...
//   opt.step();        // enqueued on each parameter's own stream, in order
//   opt.zero_grad();
//
// State (momentum buffers, Adam's moments) lives on each parameter's device, allocated on
// its stream at construction. step() and zero_grad() only enqueue work: a caller that
// computed the gradients on another stream makes that stream's work visible first (an event,
// or the pipeline's per-device ordering), or passes the stream to step(stream).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/stream.h"
#include "kernels/optimizer_params.h"
#include "layers/tape.h"

namespace brigade::layers {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Parameter*> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  // One update of every parameter from its .grad; on `stream` if given (it must be on every
  // parameter's device), else on each parameter's own stream.
  virtual void step(std::optional<Stream> stream = std::nullopt) = 0;
  void zero_grad(std::optional<Stream> stream = std::nullopt);
  int64_t steps() const { return steps_; }

 protected:
  Stream stream_of(const Parameter& p, const std::optional<Stream>& stream) const {
    return stream ? *stream : p.value.stream();
  }
  std::vector<Parameter*> params_;
  int64_t steps_ = 0;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter*> params, SgdParams h);
  void step(std::optional<Stream> stream = std::nullopt) override;

 private:
  SgdParams h_;
  std::vector<Tensor> buf_;  // momentum buffers, one per parameter
};

// Adam, or AdamW with h.decoupled = true.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Parameter*> params, AdamParams h);
  void step(std::optional<Stream> stream = std::nullopt) override;

 private:
  AdamParams h_;
  std::vector<Tensor> m_, v_;  // first and second moments
};

}  // namespace brigade::layers

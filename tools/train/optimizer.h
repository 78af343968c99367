// The trainer's optimizers: SGD (momentum, weight decay) and Adam, whose state a checkpoint
// can save and restore exactly.
//
// They are layers::Optimizer subclasses running the same kernels with the same PyTorch rules
// as layers::SGD and layers::Adam (ops::sgd_step, ops::adam_step), plus what a checkpoint
// needs and layers/optimizers.h does not offer yet: the state tensors by name (momentum
// buffers, Adam's two moments) and the step count, so that a resumed run takes bit for bit
// the steps an uninterrupted one takes.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/optimizers.h"
#include "tools/train/options.h"

namespace brigade::train {

struct NamedTensor {
  std::string name;  // "adam.m.conv2d_1.weight"
  Tensor tensor;
};

class CheckpointedOptimizer : public layers::Optimizer {
 public:
  using layers::Optimizer::Optimizer;
  // Every state tensor, named after its parameter: "sgd.momentum.<param>",
  // "adam.m.<param>", "adam.v.<param>". Empty for SGD without momentum.
  virtual std::vector<NamedTensor> state() = 0;
  void set_steps(int64_t steps) { steps_ = steps; }
  virtual std::string kind() const = 0;  // "sgd" or "adam", for checkpoints
};

class CheckpointedSgd : public CheckpointedOptimizer {
 public:
  CheckpointedSgd(std::vector<layers::Parameter*> params, SgdParams h);
  void step(std::optional<Stream> stream = std::nullopt) override;
  std::vector<NamedTensor> state() override;
  std::string kind() const override { return "sgd"; }

 private:
  SgdParams h_;
  std::vector<Tensor> buf_;  // momentum buffers, one per parameter (none without momentum)
};

class CheckpointedAdam : public CheckpointedOptimizer {
 public:
  CheckpointedAdam(std::vector<layers::Parameter*> params, AdamParams h);
  void step(std::optional<Stream> stream = std::nullopt) override;
  std::vector<NamedTensor> state() override;
  std::string kind() const override { return "adam"; }

 private:
  AdamParams h_;
  std::vector<Tensor> m_, v_;  // first and second moments, one per parameter
};

// --optimizer, --lr, --momentum, --weight-decay.
std::unique_ptr<CheckpointedOptimizer> make_optimizer(const Options& options,
                                                      std::vector<layers::Parameter*> params);

}  // namespace brigade::train

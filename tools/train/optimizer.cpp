#include "tools/train/optimizer.h"

#include <stdexcept>

namespace brigade::train {

std::unique_ptr<layers::Optimizer> make_optimizer(const Options& o,
                                                  std::vector<layers::Parameter*> params) {
  const SgdParams sgd{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay};
  const AdamParams adam{.lr = o.lr, .weight_decay = o.weight_decay};
  // The hyper-parameters are the user's flags: one out of range is a usage error (exit 2),
  // not a failure of the run, which is what the optimizers' own check would make it.
  try {
    if (o.optimizer == "sgd")
      check_sgd_params(sgd);
    else
      check_adam_params(adam, 1);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (o.optimizer == "sgd") return std::make_unique<layers::SGD>(std::move(params), sgd);
  return std::make_unique<layers::Adam>(std::move(params), adam);
}

}  // namespace brigade::train

// The trainer's optimizer: layers::SGD or layers::Adam (layers/optimizers.h, whose state a
// checkpoint reaches by name) as the command line asks for it.
#pragma once

#include <memory>
#include <vector>

#include "layers/optimizers.h"
#include "tools/train/options.h"

namespace brigade::train {

// --optimizer, --lr, --momentum, --weight-decay. An invalid hyper-parameter is a UsageError.
std::unique_ptr<layers::Optimizer> make_optimizer(const Options& options,
                                                  std::vector<layers::Parameter*> params);

}  // namespace brigade::train

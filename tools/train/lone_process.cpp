// See lone_process.h.
#include "tools/train/lone_process.h"

#include "tools/train/signals.h"

namespace brigade::train {

std::unique_ptr<StepRunner> LoneProcess::make_runner(layers::Sequential& model,
                                                     const pipeline::Plan& plan,
                                                     const Options& options) {
  return std::make_unique<PipelinedRunner>(model, plan, options);
}

int LoneProcess::stop_requested() const { return stop_signal(); }

}  // namespace brigade::train

#include "tools/train/runners.h"

#include <sstream>

#include "tools/train/optimizer.h"

namespace brigade::train {

PipelinedRunner::PipelinedRunner(layers::Sequential& model, const pipeline::Plan& plan,
                                 const Options& options) {
  const pipeline::OptimizerFactory factory = [this, &options](std::vector<layers::Parameter*> p)
      -> std::unique_ptr<layers::Optimizer> {
    std::unique_ptr<layers::Optimizer> opt = make_optimizer(options, std::move(p));
    optimizers_.push_back(opt.get());
    return opt;
  };
  runtime_ = std::make_unique<pipeline::Runtime>(
      model, plan.devices, plan.cut, plan.lowered, factory,
      pipeline::RuntimeOptions{.seed = options.seed,
                               .recompute = options.recompute,
                               .check_finite = options.check_finite,
                               .max_grad_norm = options.clip_grad_norm,
                               .cuda_graphs = options.cuda_graphs});
}

std::string PipelinedRunner::describe() const {
  const pipeline::Schedule& s = runtime_->schedule();
  std::ostringstream os;
  if (runtime_->devices().size() == 1 && runtime_->partition().count() == 1)
    os << "one stage on " << runtime_->devices()[0] << ", " << s.microbatches
       << (s.microbatches == 1 ? " micro-batch" : " micro-batches accumulated");
  else
    os << "pipeline: schedule " << s.name << ", " << runtime_->partition().count()
       << " stages on " << runtime_->devices().size()
       << (runtime_->devices().size() == 1 ? " device, " : " devices, ") << s.microbatches
       << " micro-batches";
  if (!runtime_->peer_access().empty()) os << "\n" << runtime_->peer_access();
  return os.str();
}

StagingLayout PipelinedRunner::staging() const {
  const pipeline::Schedule& s = runtime_->schedule();
  const std::vector<Device>& devices = runtime_->devices();
  return {.first = devices[static_cast<size_t>(s.device_of(0))],
          .last = devices[static_cast<size_t>(s.device_of(s.stages() - 1))],
          .microbatches = s.microbatches};
}

std::optional<pipeline::StepResult> PipelinedRunner::run(StagingArea& area,
                                                         StagingArea::Slot& slot, uint32_t step) {
  std::optional<pipeline::StepResult> r = runtime_->submit(slot.staged, step);
  area.release(slot, runtime_->batch_read());
  return r;
}

}  // namespace brigade::train

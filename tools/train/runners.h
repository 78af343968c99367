// Step runners: how one training step is executed, behind one interface.
//
//   PipelinedRunner  one process: pipeline::Runtime runs the schedule's lists over the
//                    devices — one device as several: a one-device schedule is F then BW per
//                    micro-batch — on the micro-batches staged on them, and returns the
//                    measured timeline. The runtime's factory makes the optimizers
//                    (make_optimizer) and keeps a pointer to each, so checkpoints reach
//                    their state.
//   DistributedRunner  (distributed_runner.h) this rank's role in the same, under mpirun.
// Both report the step's training accuracy, and give the same update for the same batch: the
// runtime's synchronous semantics (pipeline/runtime/runtime.h) is "one big batch on one
// device".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/timeline.h"
#include "tools/train/options.h"
#include "tools/train/staging.h"

namespace brigade::train {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Submits the step on the staged slot (taken from `area`, released back to it with the event
  // after the step's reads of it: the area refills the slot after that). Returns the result of
  // a step the host has waited for: this one, or — where the runtime leaves a step pending
  // (pipeline::Runtime::submit: GPUs whose checks give their verdict there) — the one
  // submitted before it, none for the first. In a distributed run, loss and correct are this
  // rank's shares (the ranks add them up, TrainingProcesses::agree_on_step) and peak_memory
  // names this rank's devices only.
  virtual std::optional<pipeline::StepResult> run(StagingArea& area, StagingArea::Slot& slot,
                                                  uint32_t step) = 0;
  // Waits for the pending step, if any: its result (pipeline::Runtime::flush).
  virtual std::optional<pipeline::StepResult> flush() = 0;
  virtual std::vector<layers::Optimizer*> optimizers() = 0;
  virtual StagingLayout staging() const = 0;  // where the staging area puts each batch
  virtual std::string describe() const = 0;  // one line for the start of the run
};

class PipelinedRunner : public StepRunner {
 public:
  // `plan`: the devices, the cut and the lowered lists the runtime runs (runtime.h);
  // `model` built for it (pipeline::build_model).
  PipelinedRunner(layers::Sequential& model, const pipeline::Plan& plan, const Options& options);
  std::optional<pipeline::StepResult> run(StagingArea& area, StagingArea::Slot& slot,
                                          uint32_t step) override;
  std::optional<pipeline::StepResult> flush() override { return runtime_->flush(); }
  std::vector<layers::Optimizer*> optimizers() override { return optimizers_; }
  StagingLayout staging() const override;
  std::string describe() const override;

 private:
  std::vector<layers::Optimizer*> optimizers_;  // owned by the runtime, one per stage
  std::unique_ptr<pipeline::Runtime> runtime_;
};

}  // namespace brigade::train

// DistributedRunner: the StepRunner of one rank of `brigade-train --distributed` (internal to
// tools/train; distributed.cpp makes it and reads it back for gathers and broadcasts).
//
// It runs pipeline::Runtime in this rank's role in the schedule (process_role.h), with
// links and gradient reducers from pipeline/distributed/transport.h (MPI between CPU devices,
// NCCL between GPUs), and holds an optimizer for every stage: the runtime's own for the
// stages this rank trains, and `gathered_` ones for the others, which hold the state gathered
// on rank 0 or read from a checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/transport.h"
#include "pipeline/runtime/runtime.h"
#include "tools/train/runners.h"

namespace brigade::train {

namespace dist = brigade::distributed;

// The runner of one rank: pipeline::Runtime in its role, plus an optimizer for every
// stage: the runtime's (made by its factory) for the stages this rank trains, and for the
// others `gathered_` ones, which hold the state gathered on rank 0 or read from a checkpoint.
class DistributedRunner final : public StepRunner {
 public:
  DistributedRunner(dist::MpiSession& session, dist::Topology& topology,
                    layers::Sequential& model, const pipeline::Plan& plan,
                    const Options& options);
  // This rank's shares of loss and correct: the ranks add them up (MpiRanks::agree_on_step).
  std::optional<pipeline::StepResult> run(StagingArea& area, StagingArea::Slot& slot,
                                          uint32_t step) override;
  std::optional<pipeline::StepResult> flush() override { return runtime_->flush(); }
  std::vector<layers::Optimizer*> optimizers() override { return optimizers_; }
  StagingLayout staging() const override;
  std::string describe() const override;

  const pipeline::Partition& partition() const { return partition_; }
  const pipeline::Schedule& schedule() const { return schedule_; }
  layers::Optimizer& optimizer(int stage) const {
    return *optimizers_[static_cast<size_t>(stage)];
  }
  std::vector<layers::Parameter*> parameters(int stage) const {
    const pipeline::StageRange& r = partition_.stages[static_cast<size_t>(stage)];
    return model_.parameters(r.begin, r.end);
  }

 private:
  // The stage of this rank whose parameters `p` are (its stages without parameters match any
  // empty list: their optimizers hold nothing, so which one gets which does not matter).
  int stage_of(const std::vector<layers::Parameter*>& p) const;

  layers::Sequential& model_;
  pipeline::Partition partition_;
  pipeline::Schedule schedule_;
  int position_, replicas_;
  std::vector<std::unique_ptr<pipeline::GradientReducer>> reducers_;
  std::vector<layers::Optimizer*> optimizers_;  // [stage]
  // [stage]: the state of the stages other ranks train
  std::vector<std::unique_ptr<layers::Optimizer>> gathered_;
  std::unique_ptr<pipeline::Runtime> runtime_;
  bool staged_ = false;  // run() hands the runtime the staged micro-batches, else a host batch
  std::optional<int64_t> nan_before_step_;  // BRIGADE_INJECT_NAN for this rank (fault_injection.h)
};

}  // namespace brigade::train

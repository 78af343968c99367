// DistributedRunner: the StepRunner of one rank of `brigade-train --distributed` (internal to
// tools/train; distributed.cpp makes it and reads it back for gathers and broadcasts).
//
// It runs pipeline::Runtime over this rank's share of the schedule (process_share.h), with
// links and gradient reducers from pipeline/distributed/transport.h (MPI between CPU devices,
// NCCL between GPUs), and holds an optimizer for every stage: the runtime's own for the
// stages this rank trains, and `gathered_` ones for the others, which hold the state gathered
// on rank 0 or read from a checkpoint.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/transport.h"
#include "pipeline/runtime/runtime.h"
#include "tools/train/optimizer.h"
#include "tools/train/runners.h"

namespace brigade::train {

namespace dist = brigade::distributed;

// A staged batch of one micro-batch, staged on the host (StagingLayout on cpu:0), as the
// host batch Runtime::step(HostBatch) takes: the runtime cuts this replica's rows from it.
// Staging on the host keeps a GPU rank from copying the batch up and back down.
inline pipeline::HostBatch host_batch(const pipeline::StagedBatch& staged) {
  if (staged.inputs_ready.recorded()) staged.inputs_ready.synchronize();
  if (staged.labels_ready.recorded()) staged.labels_ready.synchronize();
  const Tensor& x = staged.inputs.at(0);  // (n, C, H, W) on cpu:0
  const Tensor& y = staged.labels.at(0);  // (n) int32 bits in a float32-sized tensor (kernels/ops.h)
  const int32_t* labels = reinterpret_cast<const int32_t*>(y.data<float>());
  return {x.to_vector(), x.shape(), std::vector<int32_t>(labels, labels + y.numel())};
}

// The runner of one rank: pipeline::Runtime over its share, plus an optimizer for every
// stage: the runtime's (made by its factory) for the stages this rank trains, and for the
// others `gathered_` ones, which hold the state gathered on rank 0 or read from a checkpoint.
class DistributedRunner final : public StepRunner {
 public:
  DistributedRunner(dist::MpiSession& session, dist::Topology& topology,
                    layers::Sequential& model, pipeline::Partition partition,
                    pipeline::LoweredSchedule lowered, const Options& options)
      : model_(model),
        partition_(partition),
        schedule_(pipeline::compute_only(lowered)),
        position_(topology.position),
        replicas_(topology.replicas) {
    const int stages = partition.count();
    optimizers_.assign(static_cast<size_t>(stages), nullptr);
    gathered_.resize(static_cast<size_t>(stages));
    pipeline::ProcessShare share;
    share.devices = {topology.position};
    share.replica = topology.replica;
    share.replicas = topology.replicas;
    const int p = topology.stages, m = schedule_.microbatches;
    share.links = [&session, &topology, p, m](const pipeline::LinkEnd& end) {
      // A link number must tell apart the links between the same two ranks only (MPI matches
      // on source and tag): the boundary after stage s joins ranks s mod P and (s+1) mod P,
      // and the boundaries between the same ranks are s mod P + kP, so 2(s / P) for the
      // activations and 2(s / P) + 1 for the gradients are unique per pair and direction, and
      // stay below 2v with v chunks — far below what the tags allow (link_tags.h).
      const bool forward = end.kind == pipeline::LinkEnd::Kind::activations;
      const int boundary = forward ? end.from_stage : end.to_stage;
      const int number = 2 * (boundary / p) + (forward ? 0 : 1);
      const int peer = end.sending ? end.to_device : end.from_device;
      // MPI between CPU devices, NCCL between GPUs (--devices cuda).
      return dist::make_link(end.name, session, topology.pipeline.get(), peer, number, m,
                             end.local, end.sending);
    };
    if (topology.replicas > 1)
      for (int s = 0; s < stages; ++s) {
        if (schedule_.device_of(s) != topology.position) {
          share.reducers.push_back(nullptr);
          continue;
        }
        // Where the stage's parameters live: MPI_Allreduce on a CPU, ncclAllReduce on a GPU.
        const Device device = model.layer(partition.stages[static_cast<size_t>(s)].begin).device();
        reducers_.push_back(dist::make_reducer(session, topology.stage_replicas.get(), device));
        share.reducers.push_back(reducers_.back().get());
      }
    const pipeline::OptimizerFactory factory =
        [this, &options](std::vector<layers::Parameter*> p) -> std::unique_ptr<layers::Optimizer> {
      std::unique_ptr<CheckpointedOptimizer> opt = make_optimizer(options, p);
      optimizers_[static_cast<size_t>(stage_of(p))] = opt.get();
      return opt;
    };
    runtime_ = std::make_unique<pipeline::Runtime>(
        model, std::move(partition), std::move(lowered), factory,
        pipeline::RuntimeOptions{.seed = options.seed, .recompute = options.recompute}, share);
    for (int s = 0; s < stages; ++s)
      if (!optimizers_[static_cast<size_t>(s)]) {
        gathered_[static_cast<size_t>(s)] = make_optimizer(options, parameters(s));
        optimizers_[static_cast<size_t>(s)] = gathered_[static_cast<size_t>(s)].get();
      }
    // How this rank hands the runtime its batch (Runtime::step): staged micro-batches where
    // the runtime takes them — one replica, and this rank runs the first or the last stage
    // (it then reads only its own end: the inputs, or the labels) — and otherwise a host
    // batch, from which the runtime takes this replica's rows (a middle rank takes none: it
    // needs only the batch's size).
    staged_ = topology.replicas == 1 && (runtime_->runs(schedule_.device_of(0)) ||
                                         runtime_->runs(schedule_.device_of(stages - 1)));
  }

  StepOutcome run(StagingArea& area, StagingArea::Slot& slot, uint32_t step) override {
    // Staged: the micro-batches themselves, the runtime's streams waiting on their events.
    pipeline::StepResult r = staged_ ? runtime_->step(slot.staged, step)
                                     : runtime_->step(host_batch(slot.staged), step);
    // step() returns after its final synchronisation: nothing reads the slot any more.
    area.release(slot, Stream::default_for(area.layout().first));
    StepOutcome out;
    out.loss = r.loss;  // this rank's share: the cluster adds the shares up
    out.correct = r.correct;
    out.timeline = std::move(r.timeline);
    for (size_t d = 0; d < r.peak_bytes.size(); ++d)
      if (r.peak_bytes[d] > 0) out.peak_memory[runtime_->devices()[d].str()] = r.peak_bytes[d];
    return out;
  }

  std::vector<CheckpointedOptimizer*> optimizers() override { return optimizers_; }
  StagingLayout staging() const override {
    if (!staged_) return {.first = Device::cpu(0), .last = Device::cpu(0), .microbatches = 1};
    // Cut as the runtime cuts it, on the devices of the first and the last stage.
    const std::vector<Device>& devices = runtime_->devices();
    return {.first = devices[static_cast<size_t>(schedule_.device_of(0))],
            .last = devices[static_cast<size_t>(schedule_.device_of(schedule_.stages() - 1))],
            .microbatches = schedule_.microbatches};
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "distributed pipeline: schedule " << schedule_.name << ", " << partition_.count()
       << " stages on " << schedule_.devices << " ranks x " << replicas_
       << " replica(s), " << schedule_.microbatches << " micro-batches per replica"
       << (staged_ ? ", staged on the stages' devices" : ", cut from a batch on the host");
    return os.str();
  }

  const pipeline::Partition& partition() const { return partition_; }
  const pipeline::Schedule& schedule() const { return schedule_; }
  CheckpointedOptimizer& optimizer(int stage) const { return *optimizers_[static_cast<size_t>(stage)]; }
  std::vector<layers::Parameter*> parameters(int stage) const {
    const pipeline::StageRange& r = partition_.stages[static_cast<size_t>(stage)];
    return model_.parameters(r.begin, r.end);
  }

 private:
  // The stage of this rank whose parameters `p` are (its stages without parameters match any
  // empty list: their optimizers hold nothing, so which one gets which does not matter).
  int stage_of(const std::vector<layers::Parameter*>& p) const {
    for (int s = 0; s < partition_.count(); ++s)
      if (schedule_.device_of(s) == position_ && !optimizers_[static_cast<size_t>(s)] &&
          parameters(s) == p)
        return s;
    throw Error("distributed runner: the runtime made an optimizer for parameters of no stage");
  }

  layers::Sequential& model_;
  pipeline::Partition partition_;
  pipeline::Schedule schedule_;
  int position_, replicas_;
  std::vector<std::unique_ptr<pipeline::GradientReducer>> reducers_;
  std::vector<CheckpointedOptimizer*> optimizers_;                    // [stage]
  // [stage]: the state of the stages other ranks train
  std::vector<std::unique_ptr<CheckpointedOptimizer>> gathered_;
  std::unique_ptr<pipeline::Runtime> runtime_;
  bool staged_ = false;  // run() hands the runtime the staged micro-batches, else a host batch
};

}  // namespace brigade::train

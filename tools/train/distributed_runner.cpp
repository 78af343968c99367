// See distributed_runner.h.
#include "tools/train/distributed_runner.h"

#include <memory>
#include <sstream>

#include "pipeline/distributed/mpi_reducer.h"  // all_reduce_sum
#include "pipeline/distributed/poll.h"         // default_timeout
#include "tools/train/fault_injection.h"
#include "tools/train/optimizer.h"

namespace brigade::train {

namespace {

// A staged batch of one micro-batch, staged on the host (StagingLayout on cpu:0), as the
// host batch Runtime::submit(HostBatch) takes: the runtime cuts this replica's rows from it.
// Staging on the host keeps a GPU rank from copying the batch up and back down.
pipeline::HostBatch host_batch(const pipeline::StagedBatch& staged) {
  if (staged.inputs_ready.recorded()) staged.inputs_ready.synchronize();
  if (staged.labels_ready.recorded()) staged.labels_ready.synchronize();
  const Tensor& x = staged.inputs.at(0);  // (n, C, H, W) on cpu:0
  const Tensor& y = staged.labels.at(0);  // (n): int32 bits in a float32 tensor (kernels/ops.h)
  const int32_t* labels = reinterpret_cast<const int32_t*>(y.data<float>());
  return {x.to_vector(), x.shape(), std::vector<int32_t>(labels, labels + y.numel())};
}

}  // namespace

DistributedRunner::DistributedRunner(dist::MpiSession& session, dist::Topology& topology,
                                     layers::Sequential& model, const pipeline::Plan& plan,
                                     const Options& options)
    : model_(model),
      partition_(plan.cut),
      schedule_(plan.schedule),
      position_(topology.position),
      replicas_(topology.replicas) {
  const int stages = partition_.count();
  optimizers_.assign(static_cast<size_t>(stages), nullptr);
  gathered_.resize(static_cast<size_t>(stages));
  pipeline::ProcessRole role;
  role.devices = {topology.position};
  role.replica = topology.replica;
  role.replicas = topology.replicas;
  const int p = topology.stages, m = schedule_.microbatches;
  role.links = [&session, &topology, p, m](const pipeline::LinkEnd& end) {
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
        role.reducers.push_back(nullptr);
        continue;
      }
      // Where the stage's parameters live: MPI_Allreduce on a CPU, ncclAllReduce on a GPU.
      const Device device = model.layer(partition_.stages[static_cast<size_t>(s)].begin).device();
      reducers_.push_back(dist::make_reducer(session, topology.stage_replicas.get(), device));
      role.reducers.push_back(reducers_.back().get());
    }
  // --clip-grad-norm: the norm's parts from every rank of this pipeline. Each parameter has
  // one owner and the others add 0, so the sums are exact: every rank clips as one process.
  role.sum_over_pipeline = [&session, &topology](std::vector<double> values) {
    const auto sums = std::make_shared<std::vector<double>>(std::move(values));
    dist::all_reduce_sum(session.faults(), topology.pipeline.get(), sums, dist::default_timeout(),
                         "clipping: the squared gradient norms of the pipeline's stages");
    return *sums;
  };
  const pipeline::OptimizerFactory factory =
      [this, &options](std::vector<layers::Parameter*> p) -> std::unique_ptr<layers::Optimizer> {
    std::unique_ptr<layers::Optimizer> opt = make_optimizer(options, p);
    optimizers_[static_cast<size_t>(stage_of(p))] = opt.get();
    return opt;
  };
  runtime_ = std::make_unique<pipeline::Runtime>(
      model, plan.devices, plan.cut, plan.lowered, factory,
      pipeline::RuntimeOptions{.seed = options.seed,
                               .recompute = options.recompute,
                               .check_finite = options.check_finite,
                               .max_grad_norm = options.clip_grad_norm,
                               .cuda_graphs = options.cuda_graphs},
      role);
  for (int s = 0; s < stages; ++s)
    if (!optimizers_[static_cast<size_t>(s)]) {
      gathered_[static_cast<size_t>(s)] = make_optimizer(options, parameters(s));
      optimizers_[static_cast<size_t>(s)] = gathered_[static_cast<size_t>(s)].get();
    }
  // How this rank hands the runtime its batch (Runtime::submit): staged micro-batches where
  // the runtime takes them — one replica, and this rank runs the first or the last stage
  // (it then reads only its own end: the inputs, or the labels) — and otherwise a host
  // batch, from which the runtime takes this replica's rows (a middle rank takes none: it
  // needs only the batch's size).
  staged_ = topology.replicas == 1 && (runtime_->runs(schedule_.device_of(0)) ||
                                       runtime_->runs(schedule_.device_of(stages - 1)));
  if (const auto injection = nan_injection_from_environment();
      injection && injection->rank == session.rank())
    nan_before_step_ = injection->step;
}

std::optional<pipeline::StepResult> DistributedRunner::run(StagingArea& area,
                                                           StagingArea::Slot& slot, uint32_t step) {
  if (nan_before_step_ && static_cast<int64_t>(step) + 1 == *nan_before_step_) {
    // A fault on purpose (fault_injection.h): a weight of this rank's first stage with any.
    bool written = false;
    for (int s = 0; s < partition_.count() && !written; ++s)
      if (schedule_.device_of(s) == position_) written = write_nan_into(parameters(s));
    BRIGADE_CHECK(written, "BRIGADE_INJECT_NAN: this rank trains no stage with parameters to "
                           "write a NaN into");
  }
  // Staged: the micro-batches themselves, the runtime's streams waiting on their events.
  std::optional<pipeline::StepResult> r = staged_ ? runtime_->submit(slot.staged, step)
                                                  : runtime_->submit(host_batch(slot.staged), step);
  area.release(slot, runtime_->batch_read());
  return r;
}

StagingLayout DistributedRunner::staging() const {
  if (!staged_) return {.first = Device::cpu(0), .last = Device::cpu(0), .microbatches = 1};
  // Cut as the runtime cuts it, on the devices of the first and the last stage.
  const std::vector<Device>& devices = runtime_->devices();
  return {.first = devices[static_cast<size_t>(schedule_.device_of(0))],
          .last = devices[static_cast<size_t>(schedule_.device_of(schedule_.stages() - 1))],
          .microbatches = schedule_.microbatches};
}

std::string DistributedRunner::describe() const {
  std::ostringstream os;
  os << "distributed pipeline: schedule " << schedule_.name << ", " << partition_.count()
     << " stages on " << schedule_.devices << " ranks x " << replicas_
     << " replica(s), " << schedule_.microbatches << " micro-batches per replica"
     << (staged_ ? ", staged on the stages' devices" : ", cut from a batch on the host");
  return os.str();
}

int DistributedRunner::stage_of(const std::vector<layers::Parameter*>& p) const {
  for (int s = 0; s < partition_.count(); ++s)
    if (schedule_.device_of(s) == position_ && !optimizers_[static_cast<size_t>(s)] &&
        parameters(s) == p)
      return s;
  throw Error("distributed runner: the runtime made an optimizer for parameters of no stage");
}

}  // namespace brigade::train

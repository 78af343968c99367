#include "tools/train/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "pipeline/distributed/faults.h"
#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/mpi_link.h"
#include "pipeline/distributed/mpi_reducer.h"
#include "pipeline/distributed/poll.h"
#include "pipeline/runtime.h"
#include "tools/train/optimizer.h"

namespace brigade::train {

namespace dist = brigade::distributed;

bool wants_distributed(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--distributed") == 0) return true;
  return false;
}

struct Cluster::State {
  std::unique_ptr<dist::MpiSession> session;
  std::optional<dist::Topology> topology;
  dist::Communicator control;  // this file's own: agreement, gather, broadcast
  std::chrono::milliseconds timeout = dist::default_timeout();

  // Waits for `request` without spinning a core and without hanging (poll.h).
  void wait(MPI_Request& request, const std::string& what) {
    dist::poll_until(
        session->faults(),
        [&] {
          int done = 0;
          BRIGADE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
          return done != 0;
        },
        [] { return false; }, timeout, [&] { return what; });
  }
};

namespace {

// The runner of one rank: pipeline::Runtime over its share, plus an optimizer for every
// stage: the runtime's (made by its factory) for the stages this rank trains, and for the
// others `gathered_` ones, which hold the state gathered on rank 0 or read from a checkpoint.
class DistributedRunner final : public StepRunner {
 public:
  DistributedRunner(dist::MpiSession& session, dist::Topology& topology,
                    layers::Sequential& model, pipeline::Partition partition,
                    pipeline::Schedule schedule, const Options& options)
      : model_(model),
        partition_(partition),
        schedule_(schedule),
        position_(topology.position),
        replicas_(topology.replicas) {
    const int stages = partition.count();
    optimizers_.assign(static_cast<size_t>(stages), nullptr);
    gathered_.resize(static_cast<size_t>(stages));
    pipeline::ProcessShare share;
    share.devices = {topology.position};
    share.replica = topology.replica;
    share.replicas = topology.replicas;
    const int p = topology.stages, m = schedule.microbatches;
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
      return std::make_shared<dist::MpiLink>(end.name, session, topology.pipeline.get(), peer,
                                             number, m, end.local);
    };
    if (topology.replicas > 1)
      for (int s = 0; s < stages; ++s) {
        if (schedule.device_of(s) != topology.position) {
          share.reducers.push_back(nullptr);
          continue;
        }
        reducers_.push_back(std::make_unique<dist::MpiReducer>(session, topology.stage_replicas.get()));
        share.reducers.push_back(reducers_.back().get());
      }
    const pipeline::OptimizerFactory factory =
        [this, &options](std::vector<layers::Parameter*> p) -> std::unique_ptr<layers::Optimizer> {
      std::unique_ptr<CheckpointedOptimizer> opt = make_optimizer(options, p);
      optimizers_[static_cast<size_t>(stage_of(p))] = opt.get();
      return opt;
    };
    runtime_ = std::make_unique<pipeline::Runtime>(
        model, std::move(partition), std::move(schedule), factory,
        pipeline::RuntimeOptions{.seed = options.seed, .recompute = options.recompute}, share);
    for (int s = 0; s < stages; ++s)
      if (!optimizers_[static_cast<size_t>(s)]) {
        gathered_[static_cast<size_t>(s)] = make_optimizer(options, parameters(s));
        optimizers_[static_cast<size_t>(s)] = gathered_[static_cast<size_t>(s)].get();
      }
  }

  StepOutcome run(StagingArea& area, StagingArea::Slot& slot, uint32_t step) override {
    // The whole mini-batch, staged as one piece on this process's CPU devices, read back as
    // host vectors: the runtime takes this replica's rows of it (a staged batch is cut for one
    // process, not for a replica's share; a copy of a batch per step, not yet overlapped).
    const pipeline::StagedBatch& staged = slot.staged;
    if (staged.inputs_ready.recorded()) staged.inputs_ready.synchronize();
    if (staged.labels_ready.recorded()) staged.labels_ready.synchronize();
    const Tensor& x = staged.inputs.at(0);
    const Tensor& y = staged.labels.at(0);
    // int32 bits in a float32-sized tensor (kernels/ops.h), read through an int32 pointer
    const int32_t* labels = reinterpret_cast<const int32_t*>(y.data<float>());
    const pipeline::HostBatch batch{x.to_vector(), x.shape(),
                                    std::vector<int32_t>(labels, labels + y.numel())};
    area.release(slot, Stream::default_for(area.layout().first));
    pipeline::StepResult r = runtime_->step(batch, step);
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
    // The whole batch in one piece, on the CPU devices of stage 0 and of the last stage.
    const std::vector<Device>& devices = runtime_->devices();
    return {.first = devices[static_cast<size_t>(schedule_.device_of(0))],
            .last = devices[static_cast<size_t>(schedule_.device_of(schedule_.stages() - 1))],
            .microbatches = 1};
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "distributed pipeline: schedule " << schedule_.name << ", " << partition_.count()
       << " stages on " << schedule_.devices << " ranks x " << replicas_
       << " replica(s), " << schedule_.microbatches << " micro-batches per replica";
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
  std::vector<std::unique_ptr<dist::MpiReducer>> reducers_;
  std::vector<CheckpointedOptimizer*> optimizers_;                    // [stage]
  // [stage]: the state of the stages other ranks train
  std::vector<std::unique_ptr<CheckpointedOptimizer>> gathered_;
  std::unique_ptr<pipeline::Runtime> runtime_;
};

// Host copies of tensors, and back.
std::vector<float> host_values(const Tensor& t) { return t.to_vector(); }
void write_values(const Tensor& t, const std::vector<float>& values) {
  const Stream s = Stream::default_for(t.device());
  copy_async(t, Tensor::from_vector(values, t.shape(), s), s);
  s.synchronize();
}

// What gather and broadcast move for stage s: its parameters, then its optimizer's state.
std::vector<Tensor> stage_tensors(const DistributedRunner& runner, int s) {
  std::vector<Tensor> out;
  for (layers::Parameter* p : runner.parameters(s)) out.push_back(p->value);
  for (const NamedTensor& t : runner.optimizer(s).state()) out.push_back(t.tensor);
  return out;
}

const DistributedRunner& distributed_runner(const StepRunner& runner) {
  const auto* r = dynamic_cast<const DistributedRunner*>(&runner);
  BRIGADE_CHECK(r != nullptr, "--distributed: the step runner is not the distributed one");
  return *r;
}

}  // namespace

std::unique_ptr<Cluster> Cluster::start(int* argc, char*** argv) {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE, MPICH's and PMIx launchers PMI_SIZE / PMIX_RANK.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK"))
    throw UsageError(
        "--distributed: this process was not started by mpirun; launch one rank per pipeline "
        "device, e.g. mpirun -np 2 brigade-train --distributed ... (and -np P*D with "
        "--data-parallel D)");
  auto state = std::make_unique<State>();
  state->session = std::make_unique<dist::MpiSession>(argc, argv);
  MPI_Comm control = MPI_COMM_NULL;
  BRIGADE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control));
  state->control = dist::Communicator(control);
  return std::unique_ptr<Cluster>(new Cluster(std::move(state)));
}

Cluster::Cluster(std::unique_ptr<State> state) : state_(std::move(state)) {}
Cluster::~Cluster() = default;

int Cluster::rank() const { return state_->session->rank(); }
int Cluster::size() const { return state_->session->size(); }
int Cluster::pipeline_devices() const { return state_->topology->stages; }
int Cluster::replicas() const { return state_->topology->replicas; }
int Cluster::replica() const { return state_->topology->replica; }
int Cluster::position() const { return state_->topology->position; }

Options Cluster::pipeline_options(const Options& options, const model::ModelSpec& spec) {
  Options o = options;
  const int d = o.data_parallel;
  if (d < 1 || size() % d != 0)
    throw AllRanksError("mpirun -np " + std::to_string(size()) + " with --data-parallel " +
                            std::to_string(d) +
                            ": the number of ranks must be P x D (P ranks per pipeline, D "
                            "replicas), e.g. mpirun -np " + std::to_string(2 * d),
                        2);
  const int p = size() / d;
  const int blocks = spec.device_count, layers = static_cast<int>(spec.layers.size());
  const std::string np = "mpirun -np " + std::to_string(size()) +
                         (d > 1 ? " with --data-parallel " + std::to_string(d) : "") + " gives " +
                         std::to_string(p) + " ranks per pipeline";
  if (o.balance == "blocks" && p > blocks)
    throw UsageError(np + " but the model has " + std::to_string(blocks) + " device block" +
                     (blocks == 1 ? "" : "s") + ": run at most " + std::to_string(blocks * d) +
                     " ranks, or cut the model by --balance params|memory");
  if (p * o.chunks > layers)
    throw UsageError(np + " x " + std::to_string(o.chunks) + " chunks = " +
                     std::to_string(p * o.chunks) + " stages, but the model has only " +
                     std::to_string(layers) + " layers");
  if (o.devices != "auto")
    throw UsageError("--devices " + o.devices +
                     " with --distributed: each rank runs one CPU device of its own (GPUs over "
                     "NCCL are not wired into brigade-train yet); leave --devices out");
  if (o.balance == "time")
    throw UsageError("--balance time with --distributed: each rank would measure its own times "
                     "and cut the model differently; use --balance params or memory");
  state_->topology = dist::make_topology(*state_->session, p);
  o.devices.clear();
  for (int i = 0; i < p; ++i) o.devices += (i ? ",cpu:" : "cpu:") + std::to_string(i);
  if (o.threads_per_device == 0) {
    // The cores of this host, shared by the ranks mpirun started on it.
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_here = local ? std::max(1, std::atoi(local)) : size();
    o.threads_per_device =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
  }
  return o;
}

std::unique_ptr<StepRunner> Cluster::make_runner(layers::Sequential& model,
                                                 pipeline::Partition partition,
                                                 pipeline::Schedule schedule,
                                                 const Options& options) {
  return std::make_unique<DistributedRunner>(*state_->session, *state_->topology, model,
                                             std::move(partition), std::move(schedule), options);
}

void Cluster::gather(layers::Sequential& /*model*/, const StepRunner& step_runner) {
  const DistributedRunner& runner = distributed_runner(step_runner);
  const MPI_Comm comm = state_->control.get();
  for (int s = 0; s < runner.partition().count(); ++s) {
    const int owner = runner.schedule().device_of(s);  // replica 0's rank for stage s
    if (owner == 0) continue;                           // rank 0 trains it: nothing to move
    if (rank() != 0 && rank() != owner) continue;
    int i = 0;
    for (const Tensor& t : stage_tensors(runner, s)) {
      std::vector<float> values = rank() == owner ? host_values(t)
                                                  : std::vector<float>(static_cast<size_t>(t.numel()));
      const int tag = i++;
      MPI_Request request = MPI_REQUEST_NULL;
      if (rank() == owner)
        BRIGADE_MPI_CHECK(MPI_Isend(values.data(), static_cast<int>(values.size()), MPI_FLOAT, 0,
                                    tag, comm, &request));
      else
        BRIGADE_MPI_CHECK(MPI_Irecv(values.data(), static_cast<int>(values.size()), MPI_FLOAT,
                                    owner, tag, comm, &request));
      state_->wait(request, "gathering stage " + std::to_string(s) + " (rank " +
                                std::to_string(owner) + " -> rank 0)");
      if (rank() == 0) write_values(t, values);
    }
  }
}

void Cluster::broadcast(layers::Sequential& /*model*/, const StepRunner& step_runner,
                        Position& position) {
  const DistributedRunner& runner = distributed_runner(step_runner);
  const MPI_Comm comm = state_->control.get();
  const auto bcast = [&](void* data, int count, MPI_Datatype type, const std::string& what) {
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(MPI_Ibcast(data, count, type, 0, comm, &request));
    state_->wait(request, "broadcasting " + what + " from rank 0");
  };
  int64_t where[4] = {position.step, position.epoch, position.batch,
                      runner.optimizer(0).steps()};
  bcast(where, 4, MPI_INT64_T, "the position");
  position = {where[0], where[1], where[2]};
  for (int s = 0; s < runner.partition().count(); ++s) {
    runner.optimizer(s).set_steps(where[3]);
    for (const Tensor& t : stage_tensors(runner, s)) {
      std::vector<float> values =
          root() ? host_values(t) : std::vector<float>(static_cast<size_t>(t.numel()));
      bcast(values.data(), static_cast<int>(values.size()), MPI_FLOAT,
            "stage " + std::to_string(s));
      if (!root()) write_values(t, values);
    }
  }
}

void Cluster::on_root(const std::function<void()>& fn, const std::string& what) {
  std::string error;
  if (root()) try {
      fn();
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = what + " failed";
    }
  int length = static_cast<int>(error.size());
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Ibcast(&length, 1, MPI_INT, 0, state_->control.get(), &request));
  state_->wait(request, what + ": rank 0's outcome");
  if (length == 0) return;
  error.resize(static_cast<size_t>(length));
  BRIGADE_MPI_CHECK(MPI_Ibcast(error.data(), length, MPI_CHAR, 0, state_->control.get(), &request));
  state_->wait(request, what + ": rank 0's message");
  throw AllRanksError(error, 1);
}

Cluster::Agreement Cluster::agree(double local_loss, int64_t local_correct, int local_stop) {
  double in[3] = {local_loss, static_cast<double>(local_correct), static_cast<double>(local_stop)};
  double out[3] = {0, 0, 0};
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(in, out, 2, MPI_DOUBLE, MPI_SUM, state_->control.get(), &request));
  state_->wait(request, "adding up the step's loss");
  double stop[1] = {0};
  BRIGADE_MPI_CHECK(
      MPI_Iallreduce(in + 2, stop, 1, MPI_DOUBLE, MPI_MAX, state_->control.get(), &request));
  state_->wait(request, "agreeing on a stop signal");
  return {out[0], static_cast<int64_t>(out[1]), static_cast<int>(stop[0])};
}

void Cluster::combine(std::vector<double>& busy_ms, double& makespan_ms) {
  std::vector<double> busy(busy_ms.size(), 0.0);
  double makespan = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(busy_ms.data(), busy.data(), static_cast<int>(busy.size()),
                                   MPI_DOUBLE, MPI_SUM, state_->control.get(), &request));
  state_->wait(request, "adding up the devices' busy times");
  // The steps' time: the longest of the ranks' (each sees its own device's span of a step).
  BRIGADE_MPI_CHECK(MPI_Iallreduce(&makespan_ms, &makespan, 1, MPI_DOUBLE, MPI_MAX,
                                   state_->control.get(), &request));
  state_->wait(request, "agreeing on the steps' time");
  for (size_t i = 0; i < busy_ms.size(); ++i) busy_ms[i] = busy[i] / replicas();
  makespan_ms = makespan;
}

void Cluster::abort_job(const std::string& what) {
  dist::report_failure_and_abort(*state_->session, what);
}

}  // namespace brigade::train

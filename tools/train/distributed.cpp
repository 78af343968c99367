#include "tools/train/distributed.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "pipeline/distributed/faults.h"
#include "pipeline/distributed/local_gpu.h"
#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/poll.h"
#include "pipeline/runtime/runtime.h"
#include "tools/train/distributed_runner.h"
#include "tools/train/rank_reports.h"
#include "tools/train/run_inputs.h"
#include "tools/train/signals.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

namespace dist = brigade::distributed;

bool wants_distributed(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--distributed") == 0) return true;
  return false;
}

struct MpiRanks::State {
  std::unique_ptr<dist::MpiSession> session;
  std::optional<dist::Topology> topology;
  dist::Communicator control;  // this file's own: agreement, gather, broadcast
  dist::Communicator refusals;  // agree_on_refusal's alone: no other call can match its barrier
  // Every wait's deadline: BRIGADE_MPI_TIMEOUT_S, read once MPI knows this rank's number; the
  // default until then, and in place of a bad value until the ranks have agreed on refusing it.
  std::chrono::milliseconds timeout = dist::kDefaultTimeout;
  std::string timeout_refusal;  // BRIGADE_MPI_TIMEOUT_S's, "" where it is good

  // Waits for `request`, a call on memory inside `buffers`, without spinning a core and
  // without hanging; a wait that throws leaves `buffers` to MPI (poll.h, wait_for_request).
  void wait(MPI_Request& request, std::shared_ptr<void> buffers, const std::string& what) {
    channel().wait(request, std::move(buffers), what);
  }
  ReportChannel channel() const { return {session->faults(), control.get(), timeout}; }

  // The refusal of the lowest rank that has one ("" if none), on every rank: for a check
  // whose outcome differs between ranks (one host short of GPUs), so that every rank stops
  // alike and rank 0 says why.
  std::string first_refusal(const std::string& mine, const std::string& what) {
    const MPI_Comm comm = control.get();
    const int size = session->size();
    // {this rank's word, the least word, the refusal's length}
    const auto words = std::make_shared<std::array<int, 3>>();
    (*words)[0] = mine.empty() ? size : session->rank();
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(
        MPI_Iallreduce(&(*words)[0], &(*words)[1], 1, MPI_INT, MPI_MIN, comm, &request));
    wait(request, words, "agreeing on " + what);
    const int first = (*words)[1];
    if (first == size) return "";
    const auto text = std::make_shared<std::string>(mine);
    (*words)[2] = static_cast<int>(text->size());
    BRIGADE_MPI_CHECK(MPI_Ibcast(&(*words)[2], 1, MPI_INT, first, comm, &request));
    wait(request, words, "rank " + std::to_string(first) + "'s refusal");
    text->resize(static_cast<size_t>((*words)[2]));
    BRIGADE_MPI_CHECK(MPI_Ibcast(text->data(), (*words)[2], MPI_CHAR, first, comm, &request));
    wait(request, text, "rank " + std::to_string(first) + "'s refusal");
    return "rank " + std::to_string(first) + ": " + *text;
  }
};

namespace {

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
  for (const layers::NamedTensor& t : runner.optimizer(s).state()) out.push_back(t.tensor);
  return out;
}

const DistributedRunner& distributed_runner(const StepRunner& runner) {
  const auto* r = dynamic_cast<const DistributedRunner*>(&runner);
  BRIGADE_CHECK(r != nullptr, "--distributed: the step runner is not the distributed one");
  return *r;
}

// This command under mpirun with two ranks per replica (one where the model, cut by its
// device blocks, has one), written as every suggestion is (suggested_command.h: this program as
// it was invoked, not one looked up on PATH, --allow-run-as-root as root, --devices of one
// kind); empty for a --help. A command line brigade-train refuses throws its UsageError:
// mpirun would not mend it.
std::string under_mpirun(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return "";
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options) return "";
  Suggestion ranks;
  ranks.pipeline_devices = 2;
  if (options->balance == "blocks") {
    try {
      ranks.pipeline_devices = std::min(2, load_model(options->model).device_count);
    } catch (const std::exception&) {  // a model it cannot read: the run will say so
    }
  }
  return suggested_command(*options, ranks);
}

}  // namespace

std::unique_ptr<MpiRanks> MpiRanks::start(int* argc, char*** argv) {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE, MPICH's and PMIx launchers PMI_SIZE / PMIX_RANK.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") &&
      !std::getenv("PMIX_RANK")) {
    const std::string command = under_mpirun(*argc, *argv);
    throw UsageError(
        "--distributed: this process was not started by mpirun; launch one rank per pipeline "
        "device (-np P, or P*D with --data-parallel D)" +
        (command.empty() ? std::string() : ", e.g.:\n  " + command));
  }
  auto state = std::make_unique<State>();
  state->session = std::make_unique<dist::MpiSession>(argc, argv);
  // A bad value is refused by every rank alike, naming the rank that has it
  // (pipeline_options): a rank's own environment may differ from the others' (mpirun -x).
  try {
    state->timeout = dist::default_timeout();
  } catch (const std::exception& e) {
    state->timeout_refusal = e.what();
  }
  MPI_Comm control = MPI_COMM_NULL, refusals = MPI_COMM_NULL;
  BRIGADE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control));
  state->control = dist::Communicator(control);
  BRIGADE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &refusals));
  state->refusals = dist::Communicator(refusals);
  return std::unique_ptr<MpiRanks>(new MpiRanks(std::move(state)));
}

MpiRanks::MpiRanks(std::unique_ptr<State> state) : state_(std::move(state)) {}
MpiRanks::~MpiRanks() = default;

int MpiRanks::rank() const { return state_->session->rank(); }
int MpiRanks::size() const { return state_->session->size(); }
int MpiRanks::pipeline_devices() const { return state_->topology->stages; }
int MpiRanks::replicas() const { return state_->topology->replicas; }
int MpiRanks::schedule_device() const { return state_->topology->position; }

Options MpiRanks::pipeline_options(const Options& options, const model::ModelSpec& spec) {
  // Agreed on at the first point every rank reaches, so that rank 0 says it once and every
  // rank exits 2 at once; a rank refusing alone would first wait for the others' refusals.
  const std::string timeout_refusal =
      state_->first_refusal(state_->timeout_refusal, "BRIGADE_MPI_TIMEOUT_S");
  if (!timeout_refusal.empty()) throw AllRanksError(timeout_refusal, 2);
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
                     (blocks * d == 1 ? " rank" : " ranks") +
                     ", or cut the model by --balance flops|params|memory");
  if (p * o.chunks > layers)
    throw UsageError(np + " x " + std::to_string(o.chunks) + " chunks = " +
                     std::to_string(p * o.chunks) + " stages, but the model has only " +
                     std::to_string(layers) + " layers");
  if (o.devices != "auto" && o.devices != "cpu" && o.devices != "cuda")
    throw UsageError("--devices " + o.devices +
                     " with --distributed: each rank runs one device of its own, chosen by the "
                     "rank: --devices cuda (a GPU per rank, over NCCL) or cpu (a CPU device per "
                     "rank, over MPI; also what leaving --devices out gives)");
  const bool gpus = o.devices == "cuda";
#if !defined(BRIGADE_HAVE_NCCL)
  if (gpus)
    throw UsageError(std::string("--devices cuda with --distributed: this brigade-train was built "
                                 "without ") +
#if defined(BRIGADE_HAVE_CUDA)
                     "NCCL (Meson looks for libnccl.so beside the CUDA toolkit)"
#else
                     "CUDA (reconfigure with the CUDA toolkit and NCCL installed, -Dcuda=enabled)"
#endif
    );
#endif
  if (o.balance == "time")
    throw UsageError("--balance time with --distributed: each rank would measure its own times "
                     "and cut the model differently; use --balance params or memory");
  state_->topology = dist::make_topology(*state_->session, p);
  const dist::HostRanks here = dist::host_ranks();
  // This rank's device at its schedule device, CPU devices at the others: the runtime never touches
  // the other stages' blocks (process_role.h), so they stay in host memory.
  int gpu = -1;
  if (gpus) {
    const dist::GpuChoice choice = dist::choose_gpu(here, cuda_device_count());
    const std::string refusal = state_->first_refusal(choice.refusal, "the devices");
    if (!refusal.empty())
      throw AllRanksError("--devices cuda with --distributed: " + refusal, 2);
    gpu = choice.gpu;
  }
  o.devices.clear();
  for (int i = 0; i < p; ++i) {
    if (i > 0) o.devices += ',';
    o.devices += (i == schedule_device() && gpu >= 0 ? Device::cuda(gpu) : Device::cpu(i)).str();
  }
  if (gpu < 0 && (o.threads_per_device.empty() || o.threads_per_device[0] == 0)) {
    // The cores of this host, shared by the ranks mpirun started on it. Not for a GPU rank:
    // the one count applies to every device of the list, and a GPU has no compute threads
    // (placement.cpp refuses a count for it), so there the default (0) stays.
    o.threads_per_device = {std::max(
        1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, here.local_size))};
  }
  return o;
}

std::unique_ptr<StepRunner> MpiRanks::make_runner(layers::Sequential& model,
                                                  const pipeline::Plan& plan,
                                                  const Options& options) {
  return std::make_unique<DistributedRunner>(*state_->session, *state_->topology, model, plan,
                                             options);
}

void MpiRanks::gather_model(layers::Sequential& /*model*/, const StepRunner& step_runner) {
  const DistributedRunner& runner = distributed_runner(step_runner);
  const MPI_Comm comm = state_->control.get();
  for (int s = 0; s < runner.partition().count(); ++s) {
    const int owner = runner.schedule().device_of(s);  // replica 0's rank for stage s
    if (owner == 0) continue;                           // rank 0 trains it: nothing to move
    if (rank() != 0 && rank() != owner) continue;
    int i = 0;
    for (const Tensor& t : stage_tensors(runner, s)) {
      const auto values = std::make_shared<std::vector<float>>(
          rank() == owner ? host_values(t) : std::vector<float>(static_cast<size_t>(t.numel())));
      const int tag = i++;
      MPI_Request request = MPI_REQUEST_NULL;
      if (rank() == owner)
        BRIGADE_MPI_CHECK(MPI_Isend(values->data(), static_cast<int>(values->size()), MPI_FLOAT,
                                    0, tag, comm, &request));
      else
        BRIGADE_MPI_CHECK(MPI_Irecv(values->data(), static_cast<int>(values->size()), MPI_FLOAT,
                                    owner, tag, comm, &request));
      state_->wait(request, values, "gathering stage " + std::to_string(s) + " (rank " +
                                        std::to_string(owner) + " -> rank 0)");
      if (rank() == 0) write_values(t, *values);
    }
  }
}

void MpiRanks::broadcast_model(layers::Sequential& /*model*/, const StepRunner& step_runner,
                               ResumePoint& resume_point) {
  const DistributedRunner& runner = distributed_runner(step_runner);
  const MPI_Comm comm = state_->control.get();
  // `data`: memory inside `buffers` (poll.h, wait_for_request).
  const auto bcast = [&](void* data, int count, MPI_Datatype type, std::shared_ptr<void> buffers,
                         const std::string& what) {
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(MPI_Ibcast(data, count, type, 0, comm, &request));
    state_->wait(request, std::move(buffers), "broadcasting " + what + " from rank 0");
  };
  const auto where = std::make_shared<std::array<int64_t, 4>>(std::array<int64_t, 4>{
      resume_point.step, resume_point.epoch, resume_point.batch, runner.optimizer(0).steps()});
  bcast(where->data(), 4, MPI_INT64_T, where, "the resume point");
  resume_point = {(*where)[0], (*where)[1], (*where)[2]};
  for (int s = 0; s < runner.partition().count(); ++s) {
    runner.optimizer(s).set_steps((*where)[3]);
    for (const Tensor& t : stage_tensors(runner, s)) {
      const auto values = std::make_shared<std::vector<float>>(
          rank() == 0 ? host_values(t) : std::vector<float>(static_cast<size_t>(t.numel())));
      bcast(values->data(), static_cast<int>(values->size()), MPI_FLOAT, values,
            "stage " + std::to_string(s));
      if (rank() != 0) write_values(t, *values);
    }
  }
}

void MpiRanks::on_reporter(const std::function<void()>& fn, const std::string& what) {
  std::string error;
  bool usage = false;  // a refusal of the command line: a UsageError on every rank
  if (rank() == 0) try {
      fn();
    } catch (const UsageError& e) {
      error = e.what(), usage = true;
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = what + " failed";
    }
  // {the message's length, whether it is a usage error}
  const auto words = std::make_shared<std::array<int, 2>>(
      std::array<int, 2>{static_cast<int>(error.size()), usage ? 1 : 0});
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(
      MPI_Ibcast(words->data(), 2, MPI_INT, 0, state_->control.get(), &request));
  state_->wait(request, words, what + ": rank 0's outcome");
  const int length = (*words)[0];
  if (length == 0) return;
  const auto text = std::make_shared<std::string>(std::move(error));
  text->resize(static_cast<size_t>(length));
  BRIGADE_MPI_CHECK(
      MPI_Ibcast(text->data(), length, MPI_CHAR, 0, state_->control.get(), &request));
  state_->wait(request, text, what + ": rank 0's message");
  if ((*words)[1] != 0) throw UsageError(*text);
  throw AllRanksError(*text, 1);
}

int64_t MpiRanks::from_reporter(int64_t value, const std::string& what) {
  const auto word = std::make_shared<int64_t>(value);
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Ibcast(word.get(), 1, MPI_INT64_T, 0, state_->control.get(), &request));
  state_->wait(request, word, what + " from rank 0");
  return *word;
}

bool MpiRanks::agree_on_refusal() {
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Ibarrier(state_->refusals.get(), &request));
  // Half the others' deadline at most: a rank waiting for this one in a collective of its own
  // would otherwise give up first, and name this rank as one that died.
  const auto until = std::chrono::steady_clock::now() +
                     std::min<std::chrono::milliseconds>(state_->timeout / 2, kRefusalAgreement);
  try {
    return dist::poll_until(
        state_->session->faults(),
        [&] {
          int done = 0;
          BRIGADE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
          return done != 0;
        },
        [&] { return std::chrono::steady_clock::now() >= until; }, state_->timeout,
        [] { return std::string("the other ranks' refusals"); });
  } catch (const std::exception&) {  // another rank's failure heard: this one ends too
    return false;
  }
}

void MpiRanks::agree_on_step(pipeline::StepResult& result, bool peak_memory) {
  // On the heap: MPI's until the calls complete (poll.h, wait_for_request).
  // {loss, correct, sent bytes}, then with --metrics every rank's peaks (peak_words): this
  // rank's, every rank's sum (counts and bytes exact in a double up to 2^53). The peaks ride
  // in this sum so that --metrics adds no collective to a step.
  struct Words {
    std::vector<double> mine, summed;
  };
  const auto w = std::make_shared<Words>();
  w->mine = {result.loss, static_cast<double>(result.correct),
             static_cast<double>(result.sent_bytes)};
  if (peak_memory) {
    const std::vector<double> peaks =
        peak_words(result.peak_memory, rank(), size(), pipeline_devices());
    w->mine.insert(w->mine.end(), peaks.begin(), peaks.end());
  }
  w->summed.assign(w->mine.size(), 0.0);
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(w->mine.data(), w->summed.data(),
                                   static_cast<int>(w->mine.size()), MPI_DOUBLE, MPI_SUM,
                                   state_->control.get(), &request));
  state_->wait(request, w, "adding up the step's loss");
  result.loss = w->summed[0];
  result.correct = static_cast<int64_t>(w->summed[1]);
  result.sent_bytes = static_cast<uint64_t>(w->summed[2]);
  if (peak_memory)
    result.peak_memory =
        peaks_of_words(std::span<const double>(w->summed).subspan(3), pipeline_devices());
  agree_on_stop();
}

void MpiRanks::agree_on_stop() {
  // On the heap, as above.
  struct Words {
    int stop, any_stop;  // the signal this rank caught, the greatest caught
  };
  const auto w = std::make_shared<Words>(Words{stop_signal(), 0});
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(&w->stop, &w->any_stop, 1, MPI_INT, MPI_MAX,
                                   state_->control.get(), &request));
  state_->wait(request, w, "agreeing on a stop signal");
  agreed_stop_ = w->any_stop;
}

void MpiRanks::combine_busy_times(std::vector<double>& busy_ms, double& makespan_ms) {
  // On the heap: MPI's until the calls complete (poll.h, wait_for_request).
  struct Times {
    std::vector<double> mine, summed;  // [pipeline device]: busy ms, this rank's and the sums
    double makespan, longest;          // the steps' time: this rank's, the longest rank's
  };
  const auto t = std::make_shared<Times>(
      Times{busy_ms, std::vector<double>(busy_ms.size(), 0.0), makespan_ms, 0});
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Iallreduce(t->mine.data(), t->summed.data(),
                                   static_cast<int>(t->mine.size()), MPI_DOUBLE, MPI_SUM,
                                   state_->control.get(), &request));
  state_->wait(request, t, "adding up the devices' busy times");
  // The steps' time: the longest of the ranks' (each sees its own device's span of a step).
  BRIGADE_MPI_CHECK(MPI_Iallreduce(&t->makespan, &t->longest, 1, MPI_DOUBLE, MPI_MAX,
                                   state_->control.get(), &request));
  state_->wait(request, t, "agreeing on the steps' time");
  for (size_t i = 0; i < busy_ms.size(); ++i) busy_ms[i] = t->summed[i] / replicas();
  makespan_ms = t->longest;
}

void MpiRanks::gather_timeline(pipeline::Timeline& timeline,
                               std::chrono::steady_clock::time_point zero) {
  train::gather_timeline(state_->channel(), pipeline_devices(), timeline, zero);
}

std::string MpiRanks::device_label(size_t d, const Device& /*placed*/) const {
  if (replicas() == 1) return "rank " + std::to_string(d);
  return "ranks " + std::to_string(d) + "+" + std::to_string(pipeline_devices()) + "k";
}

void MpiRanks::end_job_for_own_error(const std::string& what) {
  dist::report_failure_and_abort(*state_->session, what);
}

}  // namespace brigade::train

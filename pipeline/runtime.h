// Runtime: executes a validated schedule (pipeline/schedule.h) on real devices — the very
// lists the simulator runs — for a Sequential cut into stages (pipeline/partition.h).
//
// Per device: a compute stream, a send stream (copies of outgoing activations/gradients to
// the neighbour's device) and a receive stream (owns the buffers those copies land in). A
// Channel (channel.h) between neighbouring stages carries (tensor, ready-event) pairs. One
// host thread per device walks that device's action list:
//   F   receive the input (or take the micro-batch), wait on its event, forward with a Tape
//       for this (stage, micro-batch) — the last stage also computes the loss and its
//       gradient — then send the output;
//   B   receive the output gradient, tape.backward_input, send the input gradient;
//   W   tape.backward_params (accumulates into .grad);  BW  both, fused.
// Activations go as soon as their B/W ran (the Tape releases them). Nothing blocks the host
// inside a step except receive() waiting for the producer's host thread to *describe* its
// work; the one host synchronisation is at the end of the step, after every stage has
// enqueued its optimizer step on its own device.
//
// A step cuts the mini-batch into the schedule's m micro-batches (sizes differ by at most
// one, larger first, so the last may be smaller) and weights every SAMPLE equally: each
// micro-batch's loss is divided by the mini-batch size, so accumulating micro-batches gives
// the mini-batch mean (synchronous semantics: the same update as one big batch).
//
// Failure: the first exception — on a host thread (out of memory, a bad shape) or in a task
// on a stream (a NaN check) — closes every channel, so blocked receivers wake; every thread
// ends, every stream drains, and step() throws PipelineError naming the device, stage, action
// and micro-batch. The runtime then replaces its streams and stays USABLE: the parameters are
// those before the failed step (optimizers step only after a complete step).
//
// CPU and CUDA devices alike: every op goes through kernels/ops.h (it dispatches by device);
// nothing enqueues a host task on a CUDA stream. Trace markers are clock-reading tasks on CPU
// streams and CUDA events on CUDA streams (timed after the final synchronisation); the NaN
// check of a GPU's output runs on a CPU "check stream" (README: How a step runs).
//
// One process's share (process_share.h): a Runtime may run only some of the schedule's
// devices — one rank of `mpirun` — with Links to the other processes' stages, and be one of
// several data-parallel replicas. It then makes streams, optimizers and threads for its own
// devices only and never touches the other stages' layers.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "pipeline/channel.h"
#include "pipeline/partition.h"
#include "pipeline/process_share.h"
#include "pipeline/schedule.h"
#include "pipeline/timeline.h"

namespace brigade::pipeline {

struct RuntimeOptions {
  uint64_t seed = 0;          // dropout masks: (seed, step, layer, sample, element)
  bool recompute = false;     // keep only each stage's input at F; redo the forward before B
  bool check_finite = false;  // a task after every F checks its output (and the loss) for NaN/Inf
  // The host thread of each device waits for an action's work (compute and send streams)
  // before it issues the next. Slower; for measurements and tests of memory: a task holds
  // its tensors until it runs, so when the host runs ahead of the streams nothing is freed
  // early and peaks depend on timing. In lockstep a device's peak is a function of its list.
  bool lockstep = false;
};

using OptimizerFactory =
    std::function<std::unique_ptr<layers::Optimizer>(std::vector<layers::Parameter*>)>;

// A mini-batch on the host: x (N, ...) row-major, N labels.
struct HostBatch {
  std::vector<float> x;
  Shape shape;
  std::vector<int32_t> labels;
};

// A mini-batch already cut into the schedule's micro-batches (rows as microbatch_rows) and
// placed on the devices that read it: what a staging area fills for the next step while the
// current one runs, so that a step starts without a host copy.
struct StagedBatch {
  std::vector<Tensor> inputs;  // [micro-batch] (rows_i, ...) on the first stage's device
  std::vector<Tensor> labels;  // [micro-batch] (rows_i), int32 bits, on the last stage's device
  // Recorded after the work that wrote them; an event never recorded means "written already".
  Event inputs_ready, labels_ready;
};

// The rows of each of m micro-batches of an n-sample mini-batch: n/m each, the first n mod m
// one more (so the last may be smaller). Throws when n < m: a micro-batch would be empty.
std::vector<int64_t> microbatch_rows(int64_t n, int m);

struct StepResult {
  double loss = 0;                   // mean cross-entropy over the mini-batch
  int64_t correct = 0;               // samples whose largest logit is their label
  Timeline timeline;                 // measured, in ms from the step's start; lanes compute, send
  std::vector<uint64_t> peak_bytes;  // per device: allocator peak in use during the step
};

class PipelineError : public Error {
 public:
  PipelineError(const std::string& message, int device, int stage, std::optional<Action> action)
      : Error(message), device_(device), stage_(stage), action_(action) {}
  int device() const { return device_; }    // index into Runtime::devices()
  int stage() const { return stage_; }      // -1 when not tied to one stage
  const std::optional<Action>& action() const { return action_; }

 private:
  int device_, stage_;
  std::optional<Action> action_;
};

class Runtime {
 public:
  // `model` must be built for the placement: stage s's layers on the device of stage s mod p
  // (place() + Sequential::from_spec). Validates the schedule, checks that it has
  // partition.count() stages. Several schedule devices may name one physical device (a single
  // GPU running a whole pipeline): their hand-overs are then copies within that device, and
  // they report its one allocator peak. Makes one optimizer per stage it runs. `share`: the
  // devices this process runs, its links to the others, its replica (process_share.h);
  // checked, and refused with what is wrong.
  Runtime(layers::Sequential& model, Partition partition, Schedule schedule,
          const OptimizerFactory& make_optimizer, RuntimeOptions options = {},
          ProcessShare share = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // One training step: every micro-batch forward and backward as the schedule says, then
  // every stage's optimizer. `step` numbers the mini-batch (dropout masks). Throws
  // PipelineError (see above) or brigade::Error for a batch that cannot be cut. A replica of
  // several (ProcessShare::replicas) is given the WHOLE mini-batch and trains on its rows.
  // Where this process does not run the last stage, loss and correct are 0.
  StepResult step(const HostBatch& batch, uint32_t step);
  // The same on a batch the caller staged: the first and last stages' compute streams wait
  // on its events (no host copy, no host wait on a CPU device).
  // One replica only, and a process that runs the first or the last stage (the rows of the
  // micro-batches are read from the staged tensors).
  StepResult step(const StagedBatch& batch, uint32_t step);

  const Schedule& schedule() const { return schedule_; }
  const Partition& partition() const { return partition_; }
  const std::vector<Device>& devices() const { return devices_; }  // devices_[d] runs lists[d]
  bool runs(int device) const { return local_[static_cast<size_t>(device)] != 0; }  // here?
  // Between neighbouring stages on two GPUs of this process, which copies go peer to peer and
  // which are staged through host memory: one line for a program to print at start-up, e.g.
  // "peer access: cuda:0<->cuda:1, cuda:1<->cuda:2"; empty when no two GPUs neighbour.
  const std::string& peer_access() const { return peer_access_; }

 private:
  struct Streams {
    Stream compute, send, recv;
    // CUDA devices with check_finite only: a CPU stream that copies outputs to the host and
    // checks them there (a CUDA stream runs no host tasks and there is no kernel for it).
    std::optional<Stream> check;
  };
  struct Slot;    // one (stage, micro-batch): its tape, saved input, output gradient, loss
  struct Timing;  // one traced piece of work
  struct Failure;

  void check_share();
  void make_links();
  void enable_peer_access_between_neighbours();
  // The step proper, on micro-batches of `rows` (staged only on the devices run here) whose
  // first sample is `first_sample` of a mini-batch of `global_n`.
  StepResult run_step(const StagedBatch& batch, const std::vector<int64_t>& rows,
                      int64_t first_sample, int64_t global_n, uint32_t step);
  void run_device(int d);
  void update_parameters(int d);  // reducers across replicas, then the optimizers
  void run_action(int d, const Action& a);
  void forward(int d, const Action& a);
  void backward(int d, const Action& a);
  void send(int d, const Action& produced, int to_stage, Link& link, const Tensor& t);
  Tensor receive(int d, Link& link, int mb);
  void trace(int d, int lane, const Action& a, const Stream& s, bool start);
  void read_cuda_markers();
  void check_finite(int d, const Action& a, const Tensor& t, const std::string& what);
  void fail(int d, const std::optional<Action>& a, std::exception_ptr e);
  void recover();
  Slot& slot(const Action& a);

  layers::Sequential& model_;
  Partition partition_;
  Schedule schedule_;
  RuntimeOptions options_;
  ProcessShare share_;
  std::vector<Device> devices_;
  std::vector<char> local_;                      // [device]: run by this process
  std::string peer_access_;                      // see peer_access()
  std::vector<std::optional<Streams>> streams_;  // [device], for the devices run here
  std::vector<std::unique_ptr<layers::Optimizer>> optimizers_;  // per stage (null: elsewhere)
  // [s]: stage s -> s+1, and s+1 -> s. In-process Channels between devices run here, the
  // share's links where one end is elsewhere, null where neither end is here.
  std::vector<std::shared_ptr<Link>> activations_;
  std::vector<std::shared_ptr<Link>> gradients_;
  // Per step.
  std::vector<std::vector<Slot>> slots_;  // [stage][micro-batch]
  std::vector<Tensor> inputs_, labels_;   // per micro-batch, on the first / last stage's device
  std::vector<int64_t> offsets_;          // per micro-batch: first sample in the mini-batch
  int64_t batch_size_ = 0;
  uint32_t step_ = 0;
  std::chrono::steady_clock::time_point t0_;  // the step's start: trace times count from it
  std::vector<Event> origins_;       // [device], CUDA: recorded on its idle compute stream...
  std::vector<double> origin_ms_;    // ...at this host time (ms since t0_): the clocks' link
  std::vector<std::deque<Timing>> timings_;  // [device], appended by that device's thread
  std::unique_ptr<Failure> failure_;
};

}  // namespace brigade::pipeline

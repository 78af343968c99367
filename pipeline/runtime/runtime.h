// Runtime: one training step of a Sequential cut into stages (partition.h), on the devices it
// is given, by interpreting a schedule's LOWERED lists (schedule/lowering.h): the very lists the
// validator proved free of deadlock and the simulator timed. Each device has a compute, a send
// and a receive stream (device_streams.h) and one host thread (executor.cpp) that issues its
// list in order — F, B, W, BW on the stage (stage.h; the last stage adds the loss, loss.h), SF/SB and
// RF/RB through the Links (link.h). pipeline/README.md, "How a step runs", walks one step.
//
// What a caller can rely on:
//   - synchronous semantics: the mini-batch is cut into m micro-batches (sizes differ by at
//     most one, larger first) and each micro-batch's loss is divided by the mini-batch size,
//     so the update is one big batch's;
//   - nothing blocks the host inside a step but a receive waiting for its producer's thread to
//     DESCRIBE its work. Where the checks' verdict lives on the GPUs (step_verdict.h: every
//     device a GPU of this process, one replica, no clipping) submit() returns as soon as the
//     step is enqueued: its result (the loss and the correct count, step_tally.h) is read by
//     the next submit(), after enqueueing that one, in one wait for an event after all of the
//     step's work — or by flush(). Elsewhere submit() waits at the step's end, once per device,
//     after every stage has enqueued its optimizer step (one more wait before it with
//     RuntimeOptions::max_grad_norm), and returns the step's own result;
//   - a failure on a host thread or in a stream task (step_checks.h) closes every link, every
//     thread ends and every stream drains; the call that learns of it throws PipelineError
//     naming the step, device, stage, action and micro-batch, and the runtime stays usable with
//     the parameters from before the failed step (the update is issued only after every device
//     ran its list cleanly; on the GPUs' verdict a failed step's words stay failed until the
//     host has read them, so the step enqueued behind it updates nothing either). No result
//     is lost: where a step fails on a host thread while the step before is pending, that
//     one is finished first, and its result comes with the failure (PipelineError::completed);
//   - CPU and CUDA devices run the same code (kernels/ops.h dispatches; no host task on a CUDA
//     stream), timed by markers on the streams (step_trace.h); a process may run only some
//     of the devices (process_role.h). One device is the same code: its list is F then BW.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/event.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "pipeline/runtime/device_streams.h"
#include "pipeline/runtime/device_threads.h"
#include "pipeline/runtime/link.h"
#include "pipeline/runtime/loss.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/runtime/process_role.h"
#include "pipeline/runtime/stage.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/timeline.h"
#include "pipeline/runtime/device_graphs.h"

namespace brigade::pipeline {

struct RuntimeOptions {
  uint64_t seed = 0;          // dropout masks: (seed, step, layer, sample, element)
  bool recompute = false;     // keep only each stage's input at F; redo the forward before B
  bool check_finite = false;  // a task after every F checks its output (and the loss) for NaN/Inf
  // > 0: before the update, every gradient is clipped by the norm of ALL of them, over every
  // stage (layers/grad_clip.h) — the same result as on one device. The norm is summed on the
  // host: one host synchronisation per step. Stages run by other processes add their parts
  // through ProcessRole::sum_over_pipeline.
  double max_grad_norm = 0;
  // The host thread of each device waits for an action's work (compute and send streams)
  // before it issues the next. Slower; for measurements and tests of memory: a task holds
  // its tensors until it runs, so when the host runs ahead of the streams nothing is freed
  // early and peaks depend on timing. In lockstep a device's peak is a function of its list.
  bool lockstep = false;
  // CUDA graphs where the step's verdict is on the GPUs (step_verdict.h: every device a GPU
  // of this process, one replica, no clipping); ignored elsewhere. Each stage's update and
  // gradient zeroing as one graph (update_graph.h), and each of its compute actions per
  // micro-batch as one (device_graphs.h: eager at a shape's first step, captured at the
  // second, replayed after). The same bits either way.
  bool cuda_graphs = true;
  // What the last stage applies to each micro-batch's output (loss.h); shared, never changed.
  std::shared_ptr<const Loss> loss = std::make_shared<SoftmaxCrossEntropy>();
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
  // Refill these tensors only after Runtime::batch_read(): a submitted step may still read them.
  std::vector<Tensor> inputs;  // [micro-batch] (rows_i, ...) on the first stage's device
  std::vector<Tensor> labels;  // [micro-batch] (rows_i), int32 bits, on the last stage's device
  // Recorded after the work that wrote them; an event never recorded means "written already".
  Event inputs_ready, labels_ready;
};

// The rows of each of m micro-batches of an n-sample mini-batch: n/m each, the first n mod m
// one more (so the last may be smaller). Throws when n < m: a micro-batch would be empty.
std::vector<int64_t> microbatch_rows(int64_t n, int m);
// The rows of the largest, microbatch_rows(n, m)[0], without its check (m >= 1 still): what a
// step's memory is weighed by, also for mini-batches a run would refuse.
int64_t largest_microbatch_rows(int64_t n, int m);

struct StepResult {
  uint32_t step = 0;                 // the mini-batch number submit() was given
  double loss = 0;                   // the loss's mean over the mini-batch (RuntimeOptions::loss)
  int64_t correct = 0;               // samples it counts as correct (accuracy's numerator)
  Timeline timeline;                 // measured, in ms from the step's start; lanes compute, send
  // The step's start on this process's steady clock, the timeline's 0 (but on GPUs behind a
  // pending step, whose end is their 0: StepTrace::zero): what puts another process's timeline
  // of the same step on this one's clock (brigade-train --distributed, whose steps are never
  // submitted behind one).
  std::chrono::steady_clock::time_point timeline_zero;
  // The bytes this process's devices sent to other devices (stages on another device, here
  // or in another process): activations and input gradients. A bf16 run sends them in bf16
  // storage, half an fp32 run's bytes (kernels/precision.h).
  uint64_t sent_bytes = 0;
  // Per device this process runs, by name ("cuda:1"): the allocator's peak in use during
  // the step (a --metrics line's peak_memory).
  std::map<std::string, uint64_t> peak_memory;
};

class PipelineError : public Error {
 public:
  PipelineError(const std::string& message, uint32_t step, int device, int stage,
                std::optional<Action> action, std::optional<StepResult> completed = std::nullopt)
      : Error(message), step_(step), device_(device), stage_(stage), action_(action),
        completed_(completed ? std::make_shared<const StepResult>(std::move(*completed))
                             : nullptr) {}
  uint32_t step() const { return step_; }   // the failed step's number (submit()'s `step`)
  int device() const { return device_; }    // index into Runtime::devices()
  int stage() const { return stage_; }      // -1 when not tied to one stage
  const std::optional<Action>& action() const { return action_; }
  // The result of the step submitted before the failed one, when that step was still pending
  // (the GPUs' verdict) and completed cleanly: the call that threw finished it, and no call
  // returns it but through this error. Null otherwise (also when that step failed: then this
  // error is its own). A caller reports it before the failure, so no step's result is lost.
  const StepResult* completed() const { return completed_.get(); }

 private:
  uint32_t step_;
  int device_, stage_;
  std::optional<Action> action_;
  std::shared_ptr<const StepResult> completed_;  // shared: an exception's copies stay cheap
};

class Runtime {
 public:
  // Runs `model`'s stages on `devices` (devices[d] runs the schedule's device d; a plan's
  // devices, plan.h), each stage's layers [begin, end) from `partition`. The model must be
  // built there — stage s's layers on devices[schedule.device_of(s)] (build_model) — and is
  // checked against them (on the devices this process runs). Validates the schedule, lowers
  // it, checks that it has partition.count() stages. Several schedule devices may name one
  // physical device (a single GPU running a whole pipeline): their hand-overs are then copies
  // within that device, and they report its one allocator peak. Makes one optimizer per stage
  // it runs. `role`: the devices this process runs, its links to the others, its replica
  // (process_role.h); checked, and refused with what is wrong.
  Runtime(layers::Sequential& model, std::vector<Device> devices, Partition partition,
          Schedule schedule, const OptimizerFactory& make_optimizer, RuntimeOptions options = {},
          ProcessRole role = {});
  // The same for lists already lowered (a plan's, a schedule file's): validated as lowered
  // lists — matched transfers, and a proof that no device can wait on itself — and run as
  // they are.
  Runtime(layers::Sequential& model, std::vector<Device> devices, Partition partition,
          LoweredSchedule lowered, const OptimizerFactory& make_optimizer,
          RuntimeOptions options = {}, ProcessRole role = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // One training step, enqueued: every micro-batch forward and backward as the schedule says,
  // then every stage's optimizer. `step` numbers the mini-batch (dropout masks). Returns the
  // result of a step whose work the host has now waited for, or none:
  //   - the checks' verdict on the GPUs (see above): the step submitted BEFORE this one (none
  //     on the first call, or after flush()); this one stays pending until the next submit()
  //     or flush(). The one host wait is for that step before, after this one is enqueued,
  //     so the GPUs never idle between the two;
  //   - elsewhere (CPU devices, devices of other processes, replicas, clipping): this step's
  //     own, after its wait; nothing stays pending.
  // Throws PipelineError (see above; PipelineError::step() says which step failed) or
  // brigade::Error for a batch that cannot be cut (before anything is enqueued: a pending step
  // stays pending). When this step fails before it is enqueued — on a host thread (a bad
  // shape, out of memory) or while its batch is staged — the step submitted before it, if
  // pending, is finished first: its failure, if it failed, is the one thrown; else its result
  // comes with this step's failure (PipelineError::completed()). A replica of several
  // (ProcessRole::replicas) is given the WHOLE mini-batch and trains on its rows. Where this
  // process does not run the last stage, loss and correct are 0.
  std::optional<StepResult> submit(const HostBatch& batch, uint32_t step);
  // The same on a batch the caller staged: the first and last stages' compute streams wait
  // on its events (no host copy, no host wait on a CPU device); refill its tensors only after
  // batch_read(). One replica only, and a process that runs the first or the last stage (the
  // rows of the micro-batches are read from the staged tensors).
  std::optional<StepResult> submit(const StagedBatch& batch, uint32_t step);
  // Waits for the pending step, if any, and returns its result (or throws its failure). Call
  // it before reading the parameters (a checkpoint, an evaluation) and at the end of a run.
  std::optional<StepResult> flush();
  // The step submitted last (none when nothing is pending).
  std::optional<uint32_t> pending_step() const;
  // An event after every read of the last submitted step's batch (never recorded: read
  // already, when submit() waited for that step).
  Event batch_read() const { return batch_read_; }
  // submit() then flush(): this step's result, after its wait. Refused while a step is pending.
  StepResult step(const HostBatch& batch, uint32_t step);
  StepResult step(const StagedBatch& batch, uint32_t step);

  const Schedule& schedule() const { return schedule_; }  // the compute instructions
  const LoweredSchedule& lowered() const { return lowered_; }  // what the executor runs
  const Partition& partition() const { return partition_; }
  const std::vector<Device>& devices() const { return devices_; }  // devices_[d] runs lists[d]
  bool runs(int device) const { return local_[static_cast<size_t>(device)] != 0; }  // here?
  // Between neighbouring stages on two GPUs of this process, which copies go peer to peer and
  // which are staged through host memory: one line for a program to print at start-up, e.g.
  // "peer access: cuda:0<->cuda:1, cuda:1<->cuda:2"; empty when no two GPUs neighbour.
  const std::string& peer_access() const { return peer_access_; }

 private:
  struct Step;  // one step's state (step.h): passed along; kept only while pending

  // runtime.cpp: putting the pipeline together.
  void check_placement();
  void check_role();
  void make_stages(const OptimizerFactory& make_optimizer);
  void make_links();
  void enable_peer_access_between_neighbours();
  void recover();  // fresh streams (a failed stream stays failed), links reopened
  // After a failed step: recover(); where that fails too, the words to put after the step's
  // own diagnosis (which must stay what the user reads), else "".
  std::string recover_after_failure();

  // executor.cpp: the step, on micro-batches of `rows` (staged only on the devices run here)
  // whose first sample is `first_sample` of a mini-batch of `global_n`; what submit() returns.
  std::optional<StepResult> run_step(const StagedBatch& batch, const std::vector<int64_t>& rows,
                      int64_t first_sample, int64_t global_n, uint32_t step);
  void run_device(int d, Step& step);
  void execute(int d, const Instruction& i, Step& step);
  void forward(int d, const Instruction& i, Step& step);
  void backward(int d, const Instruction& i, Step& step);
  // Whether device d's compute actions run as CUDA graphs this step, and the Key of its
  // graphs for the step (device_graphs.h).
  bool graphs_on(int d, const Step& step) const;
  DeviceGraphs::Key graph_key(int d, const Step& step) const;
  void send(int d, const Action& produced, Link& link, const Tensor& t, Step& step);
  Tensor receive(int d, const Action& receiving, Link& link, Step& step);
  // True when the step's checks give their verdict on the GPUs (step_verdict.h): every
  // device is a GPU of this process, one replica, no clipping. Else their host path.
  bool verdict_on_devices() const;
  // The reducers, the clipping and the optimizers, in stage order; true when the optimizers
  // were issued (their step counts advanced).
  bool update_parameters(Step& step);
  void abandon_reductions(const std::string& why);  // a failed step's, for the replicas
  bool clip_gradients();
  void fail(Step& step, int d, const std::optional<Instruction>& where, std::exception_ptr e);

  // step_end.cpp: how a step ends. An event after all of the step's work, on the last stage's
  // device (the asynchronous path's one wait).
  Event end_event();
  // Waits for `step`, reads its verdict and its tally: its result, or its failure thrown.
  // `next`: a step enqueued behind it, whose update obeyed its words: when `step` failed,
  // `next` is waited for, its optimizers' step counts undone, and it is dropped.
  StepResult finish(std::unique_ptr<Step> step, std::unique_ptr<Step>& next);
  void abandon(Step& next);
  // A failed step's update changed nothing, but the optimizers of the stages on `devices`
  // ([device], 1: undo) counted it when it was issued: that count undone.
  void undo_optimizer_steps(const Step& step, const std::vector<char>& devices);
  [[noreturn]] void throw_failure(Step& step);

  layers::Sequential& model_;
  Partition partition_;
  Schedule schedule_;        // compute-only
  LoweredSchedule lowered_;  // with its transfers: the lists the executor runs
  RuntimeOptions options_;
  ProcessRole role_;
  std::vector<Device> devices_;                         // [device]
  std::vector<char> local_;                             // [device]: run by this process
  std::string peer_access_;                             // see peer_access()
  std::vector<std::optional<DeviceStreams>> streams_;   // [device], for the devices run here
  std::vector<std::unique_ptr<Stage>> stages_;          // [stage], null where run elsewhere
  // [s]: stage s -> s+1, and s+1 -> s. In-process Channels between devices run here, the
  // role's links where one end is elsewhere, null where neither end is here.
  std::vector<std::shared_ptr<Link>> activations_;
  std::vector<std::shared_ptr<Link>> gradients_;
  // Each device's verdict word (step_verdict.h), across steps: zeroed when made, failed only
  // by a failed step, and made again after the host has read that failure.
  std::vector<Tensor> verdict_words_;  // [device]: (1) int32 on that device
  // Where the compute actions are CUDA graphs: each GPU's word holding the step's number,
  // written at each step's start, which the dropout kernels read (layers/tape.h); and the
  // graphs of each device, touched only by its thread (dropped with the streams: recover()).
  std::vector<Tensor> step_words_;   // [device]: (1) uint32 bits, or undefined
  std::vector<DeviceGraphs> graphs_;  // [device]
  std::unique_ptr<Step> pending_;  // submitted, not yet waited for (the GPUs' verdict only)
  Event batch_read_;                // see batch_read()
  // One host thread per device run here, across steps (device_threads.h); last, so that it is
  // made after everything its threads use and joined before any of it goes.
  std::unique_ptr<DeviceThreads> threads_;
};

}  // namespace brigade::pipeline

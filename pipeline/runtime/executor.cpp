// The executor: how a Runtime (runtime.h) runs one step. One host thread per device
// (device_threads.h, living across steps) takes the next instruction of its lowered list and
// issues its work on the device's streams; the step's state is one Step, made here and passed
// to every function that needs it.
//
//   run_step        set up the Step, wake the device threads, wait for them; then the
//                   update (only after a step without failure: on GPUs the kernels obey the
//                   checks' verdict, step_verdict.h; elsewhere the host waits for it first);
//                   then, on the GPUs' verdict, the step is left pending and the one before
//                   is finished (step_end.cpp: its one wait, its result read from its tally,
//                   step_tally.h, and its verdict), else this step is finished at once
//   run_device      the loop: the device's first calls (the staged batch's events, the step
//                   before's end, the trace's origin), zero the stages' gradients, then each
//                   instruction in
//                   list order
//   execute         one instruction: a compute action (forward, backward) or a transfer
//                   (send, receive); on GPUs, a compute action as a CUDA graph where they
//                   are on (graphs_on: sized, captured or replayed, device_graphs.h)
//
// Read in that order, then update.cpp (the update run_step calls: sums across replicas,
// clipping, the optimizers) and step_end.cpp (the wait, the result or the failure); step.h
// holds the Step. The pieces it calls are stage.h (the
// layers), step_checks.h and step_verdict.h (the NaN and label checks, on the host or on the
// GPUs), step_trace.h (the measured timeline), link.h (the neighbours), compute_lead.h (how far
// a CPU device's host thread runs ahead) and device_streams.h (the streams of a device).
#include <algorithm>
#include <mutex>
#include <sstream>
#include <utility>

#include "engine/allocator.h"
#include "engine/event.h"
#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"
#include "kernels/micro_batch_tally.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "pipeline/runtime/compute_lead.h"
#include "pipeline/runtime/step_checks.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step.h"
#include "pipeline/runtime/step_state.h"
#include "pipeline/runtime/step_tally.h"
#include "pipeline/runtime/step_trace.h"
#include "pipeline/runtime/step_verdict.h"

namespace brigade::pipeline {
std::optional<StepResult> Runtime::run_step(const StagedBatch& batch,
                                            const std::vector<int64_t>& rows, int64_t first_sample,
                                            int64_t global_n, uint32_t step_number) {
  const int m = schedule_.microbatches;
  const int last_device = schedule_.device_of(schedule_.stages() - 1);
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d]) Allocator::of(devices_[d]).reset_peak();

  std::unique_ptr<Step> owned(new Step{
      .inputs = {.step = step_number, .seed = options_.seed, .batch_size = global_n,
                 .inputs = batch.inputs, .labels = batch.labels, .first_sample = {},
                 .rows = rows, .step_words = {}},
      .inputs_ready = batch.inputs_ready,
      .labels_ready = batch.labels_ready,
      .work = StepWork(static_cast<size_t>(schedule_.stages())),
      .trace = StepTrace(devices_),
      .tally = runs(last_device) ? StepTally(m, *streams_[static_cast<size_t>(last_device)])
                                 : StepTally(),
      .verdict = {},
      .failure = {},
      .after = pending_ ? pending_->done : Event(),
      .stepped = false,
      .done = {},
      .known = {},
      .completed_before = {}});
  Step& step = *owned;
  std::vector<const DeviceStreams*> mine;
  for (const std::optional<DeviceStreams>& s : streams_) mine.push_back(s ? &*s : nullptr);
  if (verdict_on_devices()) {
    if (verdict_words_.size() != devices_.size()) verdict_words_.assign(devices_.size(), Tensor());
    step.verdict = StepVerdict(mine, last_device, verdict_words_);
  }
  int64_t offset = first_sample;  // dropout masks: the sample's place in the whole mini-batch
  for (int64_t r : rows) {
    step.inputs.first_sample.push_back(offset);
    offset += r;
  }
  for (auto& stage : step.work) stage.resize(static_cast<size_t>(m));
  graphs_.resize(devices_.size());
  step_words_.resize(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d)
    if (local_[d] && graphs_on(static_cast<int>(d), step)) {
      // On the device's default stream, like the verdict's words: it outlives the streams that
      // use it (a failed step's are replaced). Written at the device's start (run_device).
      if (!step_words_[d].defined())
        step_words_[d] = Tensor::empty(Shape({1}), Stream::default_for(devices_[d]));
      step.inputs.step_words[streams_[d]->compute.id()] = step_words_[d];
    }

  threads_->run([this, &step](int d) { run_device(d, step); });  // run_device catches all

  // A failed step changes no parameter. On GPUs whose checks give their verdict there
  // (step_verdict.h), every word reaches every device and the optimizers' kernels obey it:
  // the host does not wait. Elsewhere the checks of CUDA devices run on host streams behind
  // the GPU and the update waits for their verdict (on a CPU device a failed check is the
  // stream's sticky error, and the update behind it would be skipped anyway); it is issued
  // only when every device ran its list and every check passed. (Stages in order: replicas'
  // reducers meet in the same order.)
  const CheckVerdict verdict = step.verdict.defined() ? CheckVerdict{} : check_verdict(mine);
  if (!step.failure.failed && !verdict.error)
    step.stepped = update_parameters(step);
  else
    abandon_reductions(what_of(step.failure.failed ? step.failure.error : verdict.error));
  if (!step.failure.failed && verdict.error) {
    step.failure.failed = true;
    step.failure.device = verdict.device;
    if (verdict.action) step.failure.where = instruction(*verdict.action);
    step.failure.error = verdict.error;
  }
  step.known.step = step_number;
  step.known.sent_bytes = step.trace.sent_bytes();

  // On the GPUs' verdict a step that every host thread enqueued cleanly is left pending: the
  // host waits for the step before (if any), now that this one is behind it on the GPUs.
  if (step.verdict.defined() && !step.failure.failed) {
    step.work.clear();  // its tensors go now, in stream order, not with the next step
    for (size_t d = 0; d < devices_.size(); ++d)
      step.known.peak_memory[devices_[d].str()] = Allocator::of(devices_[d]).stats().peak_in_use;
    step.done = end_event();
    batch_read_ = step.done;
    std::unique_ptr<Step> before = std::exchange(pending_, std::move(owned));
    if (!before) return std::nullopt;
    return finish(std::move(before), pending_);
  }
  batch_read_ = Event();  // this step is waited for below: its batch is read by then
  // A step that failed on a host thread behind a pending one: the pending one first. Its
  // failure, if any, came first and is the one thrown; else its result goes with this step's
  // failure, so that the caller still reports it (PipelineError::completed).
  if (pending_) {
    std::unique_ptr<Step> before = std::move(pending_);
    step.completed_before = finish(std::move(before), owned);
  }
  std::unique_ptr<Step> none;
  return finish(std::move(owned), none);
}

void Runtime::run_device(int d, Step& step) {
  std::optional<Instruction> current;
  try {
    const DeviceStreams& mine = *streams_[static_cast<size_t>(d)];
    // The step's first calls on this device are made here, where their failure is this
    // device's (a GPU that faulted since the last step is named with the step): the
    // verdict's word, the staged batch's events, then the trace's origin.
    if (step.verdict.defined()) step.verdict.start(d, mine);
    // Behind a pending step: this one starts after that one's end (its trace then starts
    // together on every device, step_trace.h), its send and receive streams after the origin.
    if (step.after.recorded()) mine.compute.wait(step.after);
    if (d == schedule_.device_of(0) && step.inputs_ready.recorded())
      mine.compute.wait(step.inputs_ready);
    if (d == schedule_.device_of(schedule_.stages() - 1) && step.labels_ready.recorded())
      mine.compute.wait(step.labels_ready);
    if (const auto word = step.inputs.step_words.find(mine.compute.id());
        word != step.inputs.step_words.end()) {
      // The step's number for the dropout kernels of the graphs, from page-locked memory (a
      // copy that does not wait for the host); after the step before, whose graphs read it.
      const Tensor staged = Tensor::empty_pinned(Shape({1}), Stream::default_for(Device::cpu(0)));
      *static_cast<uint32_t*>(staged.storage()->data()) = step.inputs.step;
      copy_async(word->second, staged, mine.compute);
    }
    step.trace.start(d, mine.compute, step.after.recorded());
    if (step.after.recorded()) {
      Event started;  // after the origin: no marker of the step comes before it
      started.record(mine.compute);
      mine.send.wait(started);
      mine.recv.wait(started);
    }
    for (int s : schedule_.stages_on(d)) stages_[static_cast<size_t>(s)]->zero_grad(mine.compute);
    const bool graphs = graphs_on(d, step);
    if (graphs) graphs_[static_cast<size_t>(d)].begin(graph_key(d, step), mine.compute);
    ComputeLead lead(devices_[static_cast<size_t>(d)]);
    for (const Instruction& i : lowered_.lists[static_cast<size_t>(d)]) {
      current = i;
      if (is_compute(i.kind)) lead.before_issuing();
      execute(d, i, step);
      if (is_compute(i.kind)) lead.issued(mine.compute);
      if (options_.lockstep) {  // RuntimeOptions::lockstep: the host waits for this one's work
        mine.compute.synchronize();
        mine.send.synchronize();
      }
    }
    current.reset();
    if (graphs) graphs_[static_cast<size_t>(d)].end();
    if (d == schedule_.device_of(schedule_.stages() - 1)) step.tally.copy_to_host(mine.compute);
  } catch (const ChannelClosed&) {
    // Another device failed first and closed the links: not an error of this one.
  } catch (...) {
    fail(step, d, current, std::current_exception());
  }
}

void Runtime::execute(int d, const Instruction& i, Step& step) {
  const size_t s = static_cast<size_t>(i.stage);
  MicroBatchWork& work = step.work[s][static_cast<size_t>(i.microbatch)];
  switch (i.kind) {
    case Kind::F:
      forward(d, i, step);
      return;
    case Kind::B:
    case Kind::W:
    case Kind::BW:
      backward(d, i, step);
      return;
    case Kind::SendF:
      send(d, {i.stage, Op::F, i.microbatch}, *activations_[s], std::exchange(work.output, {}), step);
      return;
    case Kind::SendB:
      send(d, {i.stage, Op::B, i.microbatch}, *gradients_[s - 1], std::exchange(work.dx, {}), step);
      return;
    case Kind::RecvF:
      work.input = receive(d, {i.stage, Op::F, i.microbatch}, *activations_[s - 1], step);
      return;
    case Kind::RecvB:
      work.dy = receive(d, {i.stage, Op::B, i.microbatch}, *gradients_[s], step);
      return;
  }
}

// F: the stage's input — the micro-batch itself, what RF received, or what the stage before
// left on this device — through its layers; the last stage adds the loss and its gradient.
// Where device d's actions are CUDA graphs (graphs_on), through its graphs (device_graphs.h).
void Runtime::forward(int d, const Instruction& i, Step& step) {
  const DeviceStreams& mine = *streams_[static_cast<size_t>(d)];
  const Stage& stage = *stages_[static_cast<size_t>(i.stage)];
  const int mb = i.microbatch;
  MicroBatchWork& work = step.work[static_cast<size_t>(i.stage)][static_cast<size_t>(mb)];
  const Action a = compute_action(i);
  const Tensor x = stage.first() ? step.inputs.inputs[static_cast<size_t>(mb)]
                                 : std::exchange(work.input, {});
  BRIGADE_CHECK(x.defined(), to_string(a) << ": its input was not received");
  std::vector<Tensor> moving{x};  // what the action reads that lies elsewhere at each step
  if (stage.last()) moving.push_back(step.inputs.labels[static_cast<size_t>(mb)]);
  // The action's work on `in` (moving, or a graph's copies of it): {y, the loss's gradient,
  // the tally's row}. A graph's tally row is its own (`own_row`), copied to the step's after.
  const auto enqueue = [&](const std::vector<Tensor>& in, bool own_row) -> std::vector<Tensor> {
    const Tensor y = stage.forward(in[0], work, step.inputs, mb, options_.recompute, mine.compute);
    // On the GPUs' verdict (step_verdict.h), or on the host path (step_checks.h).
    const auto check_finite_of = [&](StepCheck check, const Tensor& t, const std::string& what) {
      if (step.verdict.defined())
        step.verdict.check_finite(d, mine.compute, a, check, t, what);
      else
        check_finite(mine, a, t, what);
    };
    if (options_.check_finite)
      check_finite_of(StepCheck::output_finite, y, "the output of stage " + std::to_string(i.stage));
    if (!stage.last()) return {y};
    // Every sample weighs 1/N of the mini-batch, whichever micro-batch it is in.
    const ops::LossResult loss =
        options_.loss->apply(y, in[1], static_cast<float>(step.inputs.batch_size), mine.compute);
    // A kernel cannot throw for a bad label: its check first, the cause before the NaN. On
    // the GPUs' verdict the tally's launch makes it; elsewhere the host path.
    std::optional<ops::VerdictWord> labels_word;
    if (step.verdict.defined()) labels_word = step.verdict.labels_word(d, a, y.shape());
    const Tensor rows = own_row ? Tensor::empty(Shape({1, kTallyFloats}), mine.compute)
                                : step.tally.rows();
    options_.loss->tally(y, in[1], loss, rows, own_row ? 0 : mb, mine.compute,
                         labels_word ? &*labels_word : nullptr);  // read after the step
    if (!step.verdict.defined()) check_labels(mine, a, options_.loss, y.shape(), loss);
    if (options_.check_finite) check_finite_of(StepCheck::loss_finite, loss.loss, "the loss");
    return {y, loss.dlogits, own_row ? rows : Tensor()};
  };
  step.trace.mark(d, TraceLane::compute, a, mine.compute, true);
  std::vector<Tensor> out;
  if (graphs_on(d, step)) {
    out = graphs_[static_cast<size_t>(d)].run(
        a, mine.compute, moving, [&](const std::vector<Tensor>& in) { return enqueue(in, true); },
        step.verdict, d);
    if (stage.last())
      copy_async(step.tally.rows(), mb * kTallyFloats, out[2], 0, kTallyFloats, mine.compute);
  } else {
    out = enqueue(moving, false);
  }
  const Tensor y = out[0];
  if (stage.last()) work.dy = out[1];
  step.trace.mark(d, TraceLane::compute, a, mine.compute, false);
  if (stage.last()) return;
  if (schedule_.device_of(i.stage + 1) == d)  // the next stage is here: hand it over
    step.work[static_cast<size_t>(i.stage + 1)][static_cast<size_t>(mb)].input = y;
  else
    work.output = y;  // until SF
}

// B, W or BW on the output gradient that RB received, the loss left, or the stage after left.
void Runtime::backward(int d, const Instruction& i, Step& step) {
  const DeviceStreams& mine = *streams_[static_cast<size_t>(d)];
  const Stage& stage = *stages_[static_cast<size_t>(i.stage)];
  const int mb = i.microbatch;
  MicroBatchWork& work = step.work[static_cast<size_t>(i.stage)][static_cast<size_t>(mb)];
  const Action a = compute_action(i);
  BRIGADE_CHECK(work.dy.defined(), to_string(a) << ": its output gradient was not received");
  // The action's work; B and BW read the output gradient `in[0]` (W the one its B kept).
  const auto enqueue = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    if (a.op == Op::W) {
      stage.backward_weight(work);
      return {};
    }
    work.dy = in[0];
    if (a.op == Op::B)
      return {stage.backward_input(work, step.inputs, mb, options_.recompute, mine.compute)};
    return {stage.backward(work, step.inputs, mb, options_.recompute, mine.compute)};
  };
  std::vector<Tensor> moving;
  if (a.op != Op::W) moving.push_back(work.dy);
  step.trace.mark(d, TraceLane::compute, a, mine.compute, true);
  std::vector<Tensor> out;
  if (graphs_on(d, step)) {
    out = graphs_[static_cast<size_t>(d)].run(a, mine.compute, moving, enqueue, step.verdict, d);
    if (a.op != Op::B) {  // the micro-batch's last action here: what it kept goes
      work.tape.reset();
      work.dy = Tensor();
      work.input = Tensor();
    }
  } else {
    out = enqueue(moving);
  }
  step.trace.mark(d, TraceLane::compute, a, mine.compute, false);
  if (a.op == Op::W || stage.first()) return;
  const Tensor dx = out[0];
  if (schedule_.device_of(i.stage - 1) == d)  // the stage before is here: hand it back
    step.work[static_cast<size_t>(i.stage - 1)][static_cast<size_t>(mb)].dy = dx;
  else
    work.dx = dx;  // until SB
}

// Device d's compute actions run as CUDA graphs (device_graphs.h) when they are asked for
// and the step's verdict is on the GPUs (every device a GPU of this process: the checks need
// no host), as the update's graph is.
bool Runtime::graphs_on(int d, const Step& step) const {
  return options_.cuda_graphs && step.verdict.defined() &&
         devices_[static_cast<size_t>(d)].is_cuda();
}

// What the work device d's graphs capture was decided by, and the addresses of what it reads
// and writes in place across steps (device_graphs.h).
DeviceGraphs::Key Runtime::graph_key(int d, const Step& step) const {
  const auto address = [](const Tensor& t) {
    return t.defined() ? reinterpret_cast<uint64_t>(t.storage()->data()) : uint64_t{0};
  };
  DeviceGraphs::Key key{streams_[static_cast<size_t>(d)]->compute.id(),
                        static_cast<uint64_t>(precision()),
                        static_cast<uint64_t>(cuda_path()),
                        static_cast<uint64_t>(math_mode()),
                        static_cast<uint64_t>(step.inputs.batch_size),
                        address(verdict_words_[static_cast<size_t>(d)]),
                        address(step_words_[static_cast<size_t>(d)])};
  for (size_t mb = 0; mb < step.inputs.rows.size(); ++mb) {
    key.push_back(static_cast<uint64_t>(step.inputs.rows[mb]));
    key.push_back(static_cast<uint64_t>(step.inputs.first_sample[mb]));
  }
  for (int s : schedule_.stages_on(d))
    for (const layers::Parameter* p : stages_[static_cast<size_t>(s)]->parameters()) {
      key.push_back(address(p->value));
      key.push_back(address(p->grad));
    }
  return key;
}

// Hands `t` (written on device d's compute stream by `produced`) to the neighbour through
// `link`. A device run by another process (the link moves it; the send lane marks when it
// was written), or the same device: the tensor itself and the event after its writing.
// Another device here: the send stream waits for the compute stream, copies into a buffer of
// the receiver's device (owned by its receive stream), and the event recorded after the copy
// goes with it.
void Runtime::send(int d, const Action& produced, Link& link, const Tensor& t, Step& step) {
  const DeviceStreams& mine = *streams_[static_cast<size_t>(d)];
  const int to = schedule_.device_of(produced.op == Op::F ? produced.stage + 1 : produced.stage - 1);
  BRIGADE_CHECK(t.defined(), to_string(produced) << ": nothing to send");
  if (to == d) {  // the next or previous stage is here: the tensor itself
    Event written;
    written.record(mine.compute);
    link.send(produced.microbatch, {t, written});
    return;
  }
  // To another device: in a bf16 run the tensor holds bf16 values (layers/bf16_boundary.h),
  // so it crosses in bf16 storage, half the bytes, exactly; receive() widens it back.
  const Tensor crossing =
      precision() == Precision::bf16 ? ops::narrow_to_bf16(t, mine.compute) : t;
  step.trace.sent(d, crossing.nbytes());
  Event written;
  written.record(mine.compute);
  if (!runs(to)) {
    // The link moves it on its own thread, which no stream of this device times; what this
    // device's clock can time is when the tensor was written, the earliest the link may post
    // it (it posts then, or once the checks of that work have passed). The send lane's bar
    // starts and ends there, with no width: the start of the arrow that a merged trace draws
    // to the receive on the other process (tools/train/rank_reports.h), whose end on the
    // receiver's lane is when the tensor arrived.
    mine.send.wait(written);
    step.trace.mark(d, TraceLane::send, produced, mine.send, true);
    step.trace.mark(d, TraceLane::send, produced, mine.send, false);
    Message message{crossing, written};
    // To another process: its link sends only what passed this device's checks so far (link.h).
    if (mine.check) message.checked.record(*mine.check);
    link.send(produced.microbatch, std::move(message));
    return;
  }
  mine.send.wait(written);
  step.trace.mark(d, TraceLane::send, produced, mine.send, true);
  Tensor there = Tensor::empty(crossing.shape(), streams_[static_cast<size_t>(to)]->recv,
                               crossing.dtype());
  copy_async(there, crossing, mine.send);
  step.trace.mark(d, TraceLane::send, produced, mine.send, false);
  Event arrived;
  arrived.record(mine.send);
  link.send(produced.microbatch, {there, arrived});
}

// The tensor `receiving` (1F3 for 1RF3, 0B3 for 0RB3) takes from `link`, usable on device
// d's compute stream. The receive stream marks the receive from when it was posted to when
// the tensor is here, and the compute stream waits for that: the trace's receive lane.
Tensor Runtime::receive(int d, const Action& receiving, Link& link, Step& step) {
  const DeviceStreams& mine = *streams_[static_cast<size_t>(d)];
  step.trace.mark(d, TraceLane::recv, receiving, mine.recv, true);  // posted
  Message msg = link.receive(receiving.microbatch);  // its event is recorded: a legal wait
  mine.recv.wait(msg.ready);
  // From another Runtime of this process whose checks run on a host stream: their failure is
  // this device's too, so that its verdict fails and it abandons its reductions (replicas in
  // one process: no stage of a failed replica sums or updates). A GPU's check stream waits
  // for them; a CPU device's receive stream, whose failure its compute stream then inherits.
  if (msg.checked.recorded()) (mine.check ? *mine.check : mine.recv).wait(msg.checked);
  Tensor here = msg.tensor;
  if (msg.tensor.device() != devices_[static_cast<size_t>(d)]) {
    // A sender in another Runtime of this process handed over its own tensor (send() above):
    // the receive stream copies it here once it is written.
    here = Tensor::empty(msg.tensor.shape(), mine.recv, msg.tensor.dtype());
    copy_async(here, msg.tensor, mine.recv);
  }
  if (here.dtype() == DType::bfloat16) here = ops::widen_to_float32(here, mine.recv);  // exact
  step.trace.mark(d, TraceLane::recv, receiving, mine.recv, false);  // here
  Event arrived;  // not msg.ready.record(): copies of an Event are one event, the sender's
  arrived.record(mine.recv);
  mine.compute.wait(arrived);
  return here;
}

}  // namespace brigade::pipeline

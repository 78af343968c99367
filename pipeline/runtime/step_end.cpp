// How a step ends (Runtime, runtime.h): the host's wait for its work, then its verdict and its
// tally read — its StepResult — or its failure, recorded by the device thread that met it
// (fail) or found by the wait, thrown as a PipelineError. run_step
// (executor.cpp) calls finish() for the step it has just run (the host path) or, on the GPUs'
// verdict, for the step before it, which stayed pending while this one was enqueued:
//
//   submit(k)   enqueue k; wait for k-1's end_event(); read k-1; return k-1's result
//   flush()     wait for k's end_event(); read k; return k's result
//
// A failed k-1 found by submit(k): k's optimizers obeyed k-1's words (they stay failed on the
// devices until the host has read them, step_verdict.h), so k changed nothing either; k is
// waited for, its optimizers' step counts undone, and dropped (abandon); then k-1's failure is
// thrown, naming k-1. A k that failed on a host thread (never enqueued whole) behind a k-1
// that did not fail: k-1 is finished first, and its result is thrown with k's failure
// (PipelineError::completed), since no call returns it otherwise.
#include <mutex>
#include <sstream>
#include <utility>

#include "engine/allocator.h"
#include "engine/event.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step.h"
#include "pipeline/runtime/step_checks.h"

namespace brigade::pipeline {
namespace {
// The compute action an instruction is part of, to name it in a PipelineError: a transfer of
// an activation belongs to the stage's F, one of a gradient to its backward.
Action action_of(const Instruction& i) {
  if (is_compute(i.kind)) return compute_action(i);
  const bool activation = i.kind == Kind::SendF || i.kind == Kind::RecvF;
  return {i.stage, activation ? Op::F : Op::B, i.microbatch};
}

}  // namespace

// Every device's send and receive streams joined into its compute stream, every compute
// stream joined into the last stage's device's, and one event there: stream-ordered waits
// only (on the GPUs' verdict every device is a GPU of this process).
Event Runtime::end_event() {
  const DeviceStreams& reader = *streams_[static_cast<size_t>(schedule_.device_of(schedule_.stages() - 1))];
  for (const std::optional<DeviceStreams>& s : streams_) {
    join_side_streams(*s);
    if (&*s == &reader) continue;
    Event updated;
    updated.record(s->compute);
    reader.compute.wait(updated);
  }
  Event done;
  done.record(reader.compute);
  return done;
}

StepResult Runtime::finish(std::unique_ptr<Step> owned, std::unique_ptr<Step>& next) {
  Step& step = *owned;
  // The host's wait: on the GPUs' verdict one, for the step's end event; else one per device,
  // for an event after all of its work (drain()). A task that failed on a stream surfaces
  // here; which device's is found by draining each (a failure only: more waits then).
  std::exception_ptr stream_error;
  int stream_error_device = -1;
  std::vector<char> failed_streams(streams_.size(), 0);  // [device]: its drain threw
  bool waited = false;
  if (step.done.recorded()) try {
      step.done.synchronize();
      waited = true;
    } catch (const std::exception&) {
    }
  for (size_t d = 0; d < streams_.size() && !waited; ++d) {
    if (!streams_[d]) continue;
    try {
      drain(*streams_[d]);
    } catch (const std::exception&) {
      failed_streams[d] = 1;
      if (!stream_error) {
        stream_error = std::current_exception();
        stream_error_device = static_cast<int>(d);
      }
    }
  }
  // A failed step's updates changed nothing (the kernels obeyed the verdict; a failed stream
  // skipped its tasks); its optimizers' step counts are undone (undo_optimizer_steps).
  StepFailure& f = step.failure;
  if (!f.failed && !stream_error && step.verdict.defined())
    if (const std::optional<StepVerdict::Failure> failed = step.verdict.failure(step.tally)) {
      undo_optimizer_steps(step, std::vector<char>(streams_.size(), 1));
      f.failed = true;
      f.device = failed->device;
      f.where = instruction(failed->action);
      f.error = std::make_exception_ptr(FailedCheck(failed->message, failed->action));
    }
  if (!f.failed && stream_error) {
    undo_optimizer_steps(step, failed_streams);
    f.failed = true;
    f.device = stream_error_device;
    f.error = stream_error;
    // A failed check names its action, wherever its error was drained (it travels along the
    // waits, downstream and, in a backward, upstream); another task's failure is placed by
    // the trace, at the action left unfinished.
    if (const std::optional<Action> checked = failed_check_action(stream_error)) {
      f.device = schedule_.device_of(checked->stage);
      f.where = instruction(*checked);
    } else if (const auto origin = step.trace.unfinished()) {
      f.device = origin->first;
      f.where = instruction(origin->second);
    }
  }
  if (f.failed) {
    if (next) {
      abandon(*next);
      next.reset();  // what it held goes before the streams do (throw_failure)
    }
    throw_failure(step);
  }

  step.trace.read_cuda_markers();
  StepResult result = std::move(step.known);
  if (step.tally.defined()) {  // read after the wait above, which covered its copy
    result.loss = step.tally.loss();
    result.correct = step.tally.correct();
  }
  result.timeline = step.trace.timeline(schedule_);
  result.timeline_zero = step.trace.zero();
  if (!step.done.recorded())  // the host path: this process's devices, after the wait
    for (size_t d = 0; d < devices_.size(); ++d)
      if (local_[d])
        result.peak_memory[devices_[d].str()] = Allocator::of(devices_[d]).stats().peak_in_use;
  return result;
}

// A step enqueued behind a failed one: waited for (its failures are the failed step's
// consequences, not reported), and its optimizers' step counts undone — its kernels obeyed
// the failed step's words and updated nothing.
void Runtime::abandon(Step& next) {
  for (const std::optional<DeviceStreams>& s : streams_)
    if (s) try {
        drain(*s);
      } catch (const std::exception&) {
      }
  undo_optimizer_steps(next, std::vector<char>(streams_.size(), 1));
}

// So that SGD's first step and Adam's bias correction are as if the step never was. Only this
// process's devices hold stages.
void Runtime::undo_optimizer_steps(const Step& step, const std::vector<char>& devices) {
  if (!step.stepped) return;
  for (int d = 0; d < schedule_.devices; ++d)
    if (devices[static_cast<size_t>(d)] && runs(d))
      for (int s : schedule_.stages_on(d)) stages_[static_cast<size_t>(s)]->optimizer().undo_step();
}

// Records the step's first failure and closes every link, so blocked receivers wake.
//
// A failed check is named where it failed, whichever device's thread met it: on CPU devices a
// check fails in a task of its device's stream, the failure travels along the event waits,
// and a device downstream can meet it on its host thread (as the cause of its own stream's
// error) before anything reports it from the device that checked. Of two failed checks, the
// earlier stage's is the step's failure, as on the GPUs' verdict (check_verdict): a
// non-finite value spreads only downstream.
void Runtime::fail(Step& step, int d, const std::optional<Instruction>& where,
                   std::exception_ptr e) {
  const std::optional<Action> checked = failed_check_action(e);
  const int device = checked ? schedule_.device_of(checked->stage) : d;
  const std::optional<Instruction> at = checked ? instruction(*checked) : where;
  {
    std::lock_guard<std::mutex> lock(step.failure.mutex);
    if (step.failure.failed) {
      const std::optional<Action> recorded = failed_check_action(step.failure.error);
      if (checked && recorded && checked->stage < recorded->stage)
        step.failure.device = device, step.failure.where = at, step.failure.error = e;
      return;
    }
    step.failure.failed = true;
    step.failure.device = device;
    step.failure.where = at;
    step.failure.error = e;
  }
  const std::string why =
      "device " + std::to_string(d) + " failed" + (where ? " at " + to_string(*where) : "");
  for (auto& link : activations_)
    if (link) link->close(why);
  for (auto& link : gradients_)
    if (link) link->close(why);
}

// "pipeline step 3 (schedule 1f1b) failed on cpu:1 (device 1), stage 1, action 1F0
// (micro-batch 0): ..." — then fresh streams, and the error.
void Runtime::throw_failure(Step& step) {
  const StepFailure& f = step.failure;
  const std::optional<Action> action =
      f.where ? std::optional<Action>(action_of(*f.where)) : std::nullopt;
  std::ostringstream os;
  os << "pipeline step " << step.inputs.step << " (schedule " << schedule_.name << ") failed on "
     << devices_[static_cast<size_t>(f.device)] << " (device " << f.device << ")";
  if (f.where) {
    os << ", stage " << f.where->stage << ", action " << to_string(*action);
    if (!is_compute(f.where->kind)) os << " (its transfer " << to_string(*f.where) << ")";
    os << " (micro-batch " << f.where->microbatch << ")";
  }
  os << ": " << what_of(f.error);
  const int device = f.device;
  step.work.clear();  // what the failed step held goes before its streams do
  step.tally = StepTally();
  step.verdict = StepVerdict();
  verdict_words_.clear();  // failed: the next step makes fresh ones, zeroed
  os << recover_after_failure();
  throw PipelineError(os.str(), step.inputs.step, device, action ? action->stage : -1, action,
                      std::move(step.completed_before));
}

// A GPU whose kernel faulted keeps the error (CUDA's sticky errors): no stream can be made on
// it again, and the CUDA error of that attempt must not replace the step's diagnosis.
std::string Runtime::recover_after_failure() {
  try {
    recover();
    return "";
  } catch (const std::exception& e) {
    return std::string("; then no fresh streams could be made for the next step (") + e.what() +
           ")";
  }
}

}  // namespace brigade::pipeline

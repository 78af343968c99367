// Runtime::Step: everything one training step holds, made by run_step (executor.cpp) and
// passed to every function of the step — the executor's, the update's (update.cpp) and the
// end's (step_end.cpp); flush() (batch.cpp) and ~Runtime hold a pending one. Only those files
// include this header. A step submitted on the GPUs' verdict is kept (Runtime::pending_) until
// the host has waited for it: its tally and its verdict's host copy are its own page-locked
// buffers, so the step behind it writes others (two in turn, from the caching allocator).
#pragma once
#include <exception>
#include <mutex>
#include <optional>

#include "engine/event.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step_state.h"
#include "pipeline/runtime/step_tally.h"
#include "pipeline/runtime/step_trace.h"
#include "pipeline/runtime/step_verdict.h"

namespace brigade::pipeline {

// The first failure of a step: the device, the instruction it was running (none for an
// update or a failure found after the threads ended), and the exception.
struct StepFailure {
  std::mutex mutex;
  bool failed = false;
  int device = -1;
  std::optional<Instruction> where;
  std::exception_ptr error;
};

struct Runtime::Step {
  StepInputs inputs;
  Event inputs_ready, labels_ready;  // the staged batch's (StagedBatch)
  StepWork work;  // [stage][micro-batch]
  StepTrace trace;
  StepTally tally;  // on the last stage's device, where this process runs it
  StepVerdict verdict;  // the checks' verdict on the GPUs; undefined: their host path
  StepFailure failure;
  // The step before's end_event(), when it was still pending as this one began: every stream
  // of this step waits for it, so that the step's trace starts together on every device.
  Event after;
  bool stepped = false;  // the optimizers were issued (and advanced their step counts)
  Event done;            // after all of its work (the GPUs' verdict): what the host waits for
  StepResult known;      // what the host knows once it is enqueued: sent_bytes, peak_memory
  // The step before's result, when this step failed on a host thread while that one was
  // pending and finished cleanly: thrown with this step's failure (PipelineError::completed).
  std::optional<StepResult> completed_before;
};

}  // namespace brigade::pipeline

// Runtime::Step: everything one training step holds, made by run_step (executor.cpp) and
// passed to every function of the step — the executor's, and the update's (update.cpp). Only
// those two files include this header.
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
};

}  // namespace brigade::pipeline

// The runtime's per-step records (runtime.h's private structs), shared by runtime.cpp (the
// step: set-up, threads, failures, trace) and runtime_actions.cpp (the four actions).
#pragma once
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/event.h"

#include "pipeline/runtime.h"

namespace brigade::pipeline {

struct Runtime::Slot {
  std::unique_ptr<layers::Tape> tape;  // from F (or the recomputation) until B and W ran
  Tensor input;                        // recomputation only: the stage input, until B
  Tensor dy;                           // the output gradient, from B's receive until W
  Tensor loss;                         // last stage: (1), this micro-batch's share of the loss
  Tensor logits;                       // last stage: (rows, classes), for the accuracy count
};

// The two markers of one traced piece of work. CPU stream: a task on the stream reads the
// clock (start, end are written by the stream's worker, read after synchronize()). CUDA
// stream: a CUDA event recorded at each marker; after the step's final synchronisation
// read_cuda_markers() turns them into the same clock (ms since the step's start).
struct Runtime::Timing {
  Action action;
  int lane = 0;  // 0 compute, 1 send
  double start = -1, end = -1;
  Event start_event = Event::timed(), end_event = Event::timed();  // CUDA streams only
};

// The NaN check on a CUDA device (RuntimeOptions::check_finite) failed: thrown by a task on
// the device's host check stream, carrying the action whose output was not finite.
class NonFinite : public Error {
 public:
  NonFinite(const std::string& message, Action action) : Error(message), action(action) {}
  Action action;
};

struct Runtime::Failure {
  std::mutex mutex;
  bool failed = false;
  int device = -1;
  std::optional<Action> action;
  std::exception_ptr error;
};

}  // namespace brigade::pipeline

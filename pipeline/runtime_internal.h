// The runtime's per-step records (runtime.h's private structs), shared by runtime.cpp (the
// step: set-up, threads, failures, trace) and runtime_actions.cpp (the four actions).
#pragma once
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

#include "pipeline/runtime.h"

namespace brigade::pipeline {

struct Runtime::Slot {
  std::unique_ptr<layers::Tape> tape;  // from F (or the recomputation) until B and W ran
  Tensor input;                        // recomputation only: the stage input, until B
  Tensor dy;                           // the output gradient, from B's receive until W
  Tensor loss;                         // last stage: (1), this micro-batch's share of the loss
};

struct Runtime::Timing {
  Action action;
  int lane = 0;  // 0 compute, 1 send
  // Written by the stream's worker when it reaches the marker; read after synchronize().
  double start = -1, end = -1;
};

struct Runtime::Failure {
  std::mutex mutex;
  bool failed = false;
  int device = -1;
  std::optional<Action> action;
  std::exception_ptr error;
};

}  // namespace brigade::pipeline

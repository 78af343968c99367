// The NaN check of RuntimeOptions::check_finite: after every forward, a task checks the
// stage's output (and the loss) for NaN or Inf, with no host synchronisation either way.
//
//   CPU device: a task on the compute stream. Its failure is the stream's sticky error and
//        travels along the event waits, so every later task downstream is skipped.
//   CUDA device: a CUDA stream runs no host tasks, so the device's check stream (a CPU
//        stream) waits for the write — its worker blocks, not the device's thread —, copies
//        the tensor into host memory and checks it there. The GPU carries on, and the step
//        asks for the verdict (check_verdict) before any parameter changes.
#pragma once
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"
#include "pipeline/runtime/device_streams.h"
#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

// A check failed: carries the action whose output was not finite.
class NonFinite : public Error {
 public:
  NonFinite(const std::string& message, Action action) : Error(message), action(action) {}
  Action action;
};

// Checks `t`, written by `a` on streams.compute ("the output of stage 2", "the loss").
void check_finite(const DeviceStreams& streams, const Action& a, const Tensor& t,
                  const std::string& what);

struct CheckVerdict {
  std::exception_ptr error;  // null: every check passed
  int device = -1;
  std::optional<Action> action;  // the failed check's action; none for a failed copy
};
// Waits for every CUDA device's check stream ([device], empty where none). A non-finite value
// spreads only downstream within its micro-batch, so the failing check of the smallest stage
// is where it first appeared; that one is reported.
CheckVerdict check_verdict(const std::vector<const DeviceStreams*>& devices);

}  // namespace brigade::pipeline

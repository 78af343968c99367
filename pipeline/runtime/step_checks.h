// The checks a step makes of its results without a host synchronisation, and whose verdict it
// awaits before any parameter changes:
//   - RuntimeOptions::check_finite: after every forward, the stage's output (and the loss)
//     for NaN or Inf;
//   - always, on a CUDA device: the loss's labels. A CPU loss task throws for a label outside
//     the classes; a CUDA kernel cannot, so it records the bad row in its status (and writes
//     NaN), which is checked here — without it a bad label would train on NaN.
//
//   CPU device: a task on the compute stream. Its failure is the stream's sticky error and
//        travels along the event waits, so every later task downstream is skipped.
//   CUDA device: a CUDA stream runs no host tasks, so the device's check stream (a CPU
//        stream) waits for the write — its worker blocks, not the device's thread —, copies
//        the tensor into host memory and checks it there. The GPU carries on, and the step
//        asks for the verdict (check_verdict) before any parameter changes.
#pragma once
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "pipeline/runtime/device_streams.h"
#include "pipeline/runtime/loss.h"
#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

// A check failed: carries the action whose output was not finite, or whose loss read a bad
// label.
class FailedCheck : public Error {
 public:
  FailedCheck(const std::string& message, Action action) : Error(message), action(action) {}
  Action action;
};

// Checks `t`, written by `a` on streams.compute ("the output of stage 2", "the loss").
void check_finite(const DeviceStreams& streams, const Action& a, const Tensor& t,
                  const std::string& what);
// Checks the labels of `result`, which `loss` computed for `a`'s output (of shape `output`) on
// streams.compute: a CUDA loss's status (see above); nothing for a CPU loss, whose task throws
// for itself.
void check_labels(const DeviceStreams& streams, const Action& a,
                  std::shared_ptr<const Loss> loss,
                  const Shape& output, const ops::LossResult& result);

// The action whose check failed, when `error` is a FailedCheck or the error of a stream that
// one failed (StreamError::cause, however many waits passed it on); none for any other error.
std::optional<Action> failed_check_action(const std::exception_ptr& error);

struct CheckVerdict {
  std::exception_ptr error;  // null: every check passed
  int device = -1;
  std::optional<Action> action;  // the failed check's action; none for a failed copy
};
// Waits for every CUDA device's check stream ([device], empty where none). A non-finite value
// spreads only downstream within its micro-batch, so the failing check of the smallest stage
// is where it first appeared; that one is reported (a bad label is the last stage's).
CheckVerdict check_verdict(const std::vector<const DeviceStreams*>& devices);

}  // namespace brigade::pipeline

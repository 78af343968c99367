#include "pipeline/runtime/step_checks.h"

#include <cmath>

#include "engine/event.h"

namespace brigade::pipeline {

namespace {
// Throws naming the first non-finite element of host memory p[0, n) (shape `shape`).
void throw_if_not_finite(const float* p, int64_t n, const Shape& shape, const std::string& what,
                         const Action& a) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw FailedCheck("non-finite value " + std::to_string(p[i]) + " at element " +
                            std::to_string(i) + " of " + what + " " + shape.str(),
                        a);
}

// On the device's check stream: waits for what streams.compute has enqueued so far, copies `t`
// into host memory (cpu:0) and runs `check` on that copy.
template <typename Check>
void check_on_host(const DeviceStreams& streams, const Tensor& t, Check check) {
  const Stream& stream = *streams.check;
  Event written;
  written.record(streams.compute);
  stream.wait(written);
  const Tensor host = Tensor::empty(t.shape(), stream);  // on cpu:0
  copy_async(host, t, stream);
  stream.enqueue([host, check] { check(host); });
}
}  // namespace

void check_finite(const DeviceStreams& streams, const Action& a, const Tensor& t,
                  const std::string& what) {
  if (!t.device().is_cuda()) {
    streams.compute.enqueue(
        [t, what, a] { throw_if_not_finite(t.data<float>(), t.numel(), t.shape(), what, a); });
    return;
  }
  check_on_host(streams, t, [what, a](const Tensor& host) {
    throw_if_not_finite(host.data<float>(), host.numel(), host.shape(), what, a);
  });
}

void check_labels(const DeviceStreams& streams, const Action& a,
                  std::shared_ptr<const Loss> loss, const Shape& output,
                  const ops::LossResult& result) {
  if (!result.status.defined()) return;  // a CPU loss: its task throws for a bad label
  check_on_host(streams, result.status, [a, loss, output](const Tensor& host) {
    try {
      loss->check_status(host, output);
    } catch (const Error& e) {
      throw FailedCheck(std::string("the loss: ") + e.what(), a);
    }
  });
}

std::optional<Action> failed_check_action(const std::exception_ptr& error) {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const FailedCheck& failed) {
    return failed.action;
  } catch (const StreamError& e) {
    if (e.cause()) return failed_check_action(e.cause());
  } catch (...) {
  }
  return std::nullopt;
}

CheckVerdict check_verdict(const std::vector<const DeviceStreams*>& devices) {
  CheckVerdict verdict;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (!devices[d] || !devices[d]->check) continue;
    try {
      devices[d]->check->synchronize();  // each check stream stops at its first failure
    } catch (const StreamError& e) {
      const std::exception_ptr cause = e.cause() ? e.cause() : std::current_exception();
      // None for a failed copy: reported as it is, after any NaN found.
      const std::optional<Action> action = failed_check_action(cause);
      const bool earlier =
          action && (!verdict.action || action->stage < verdict.action->stage);
      if (!verdict.error || earlier) verdict = {cause, static_cast<int>(d), action};
    }
  }
  return verdict;
}

}  // namespace brigade::pipeline

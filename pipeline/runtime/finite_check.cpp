#include "pipeline/runtime/finite_check.h"

#include <cmath>

#include "engine/event.h"

namespace brigade::pipeline {

namespace {
// Throws naming the first non-finite element of host memory p[0, n) (shape `shape`).
void throw_if_not_finite(const float* p, int64_t n, const Shape& shape, const std::string& what,
                         const Action& a) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw NonFinite("non-finite value " + std::to_string(p[i]) + " at element " +
                          std::to_string(i) + " of " + what + " " + shape.str(),
                      a);
}
}  // namespace

void check_finite(const DeviceStreams& streams, const Action& a, const Tensor& t,
                  const std::string& what) {
  if (!t.device().is_cuda()) {
    streams.compute.enqueue(
        [t, what, a] { throw_if_not_finite(t.data<float>(), t.numel(), t.shape(), what, a); });
    return;
  }
  const Stream& check = *streams.check;
  Event written;
  written.record(streams.compute);
  check.wait(written);
  const Tensor host = Tensor::empty(t.shape(), check);  // on cpu:0
  copy_async(host, t, check);
  check.enqueue([host, what, a] {
    throw_if_not_finite(host.data<float>(), host.numel(), host.shape(), what, a);
  });
}

CheckVerdict check_verdict(const std::vector<const DeviceStreams*>& devices) {
  CheckVerdict verdict;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (!devices[d] || !devices[d]->check) continue;
    try {
      devices[d]->check->synchronize();  // each check stream stops at its first failure
    } catch (const StreamError& e) {
      const std::exception_ptr cause = e.cause() ? e.cause() : std::current_exception();
      std::optional<Action> action;
      try {
        std::rethrow_exception(cause);
      } catch (const NonFinite& nan) {
        action = nan.action;
      } catch (...) {  // not a NaN (a failed copy): reported as it is, after any NaN found
      }
      const bool earlier =
          action && (!verdict.action || action->stage < verdict.action->stage);
      if (!verdict.error || earlier) verdict = {cause, static_cast<int>(d), action};
    }
  }
  return verdict;
}

}  // namespace brigade::pipeline

// HostWaitListening (engine/host_wait.h): while a listener is installed, a host wait on a
// device's work calls it between polls, ends when the work has run, throws the stream's error
// as before, and (on an emulated GPU) makes the same single host-blocking call as a wait
// without one. Each case makes the held work's release depend on the listener being called,
// so a wait that never calls it hangs, and the deadline says so.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/error.h"
#include "engine/event.h"
#include "engine/host_wait.h"
#include "engine/stream.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>

#include "engine/tensor.h"
#endif

using brigade::Device;
using brigade::Event;
using brigade::HostWaitListening;
using brigade::Stream;
using brigade::testing::Deadline;
using brigade::testing::Gate;

namespace {

// A listener that opens `gate` on its first call and keeps what the wait said it waited on.
struct HwOpener {
  Gate gate;
  std::atomic<int> calls{0};
  std::string waiting_on;  // written by the first call, read after the wait
  brigade::HostWaitListener listener() {
    return [this](const std::function<std::string()>& what) {
      if (calls.fetch_add(1) == 0) {
        waiting_on = what();
        gate.open();
      }
    };
  }
};

}  // namespace

TEST_CASE("a listened host wait calls the listener until the work has run, then throws its error") {
  Deadline deadline("host wait listener");
  for (const bool on_event : {true, false}) {
    CAPTURE(on_event);
    HwOpener opener;
    HostWaitListening listening(opener.listener());
    Stream s = Stream::create(Device::cpu(0));
    s.enqueue(opener.gate.blocker());
    s.enqueue([] { throw brigade::Error("the held work failed (a test's failure)"); });
    Event e;
    e.record(s);
    std::string error;
    try {
      if (on_event)
        e.synchronize();
      else
        s.synchronize();
    } catch (const brigade::StreamError& x) {
      error = x.what();
    }
    CHECK(opener.calls.load() >= 1);
    CHECK(error == s.str() + ": task failed: the held work failed (a test's failure)");
    CHECK(opener.waiting_on.rfind(on_event ? e.str() + " (" + s.str() : s.str(), 0) == 0);
  }
}

TEST_CASE("a listener that throws ends the wait with its exception; none installed, none called") {
  Deadline deadline("host wait listener throws");
  Stream s = Stream::create(Device::cpu(0));
  Gate gate;
  s.enqueue(gate.blocker());
  Event e;
  e.record(s);
  {
    HostWaitListening listening(
        [](const std::function<std::string()>&) { throw brigade::Error("heard a failure"); });
    CHECK_THROWS_WITH_AS(e.synchronize(), "heard a failure", brigade::Error);
    CHECK_THROWS_WITH_AS(s.synchronize(), "heard a failure", brigade::Error);
    CHECK_FALSE(e.query());  // the work is still held: the wait ended on the listener
    CHECK_THROWS_WITH_AS(HostWaitListening([](const std::function<std::string()>&) {}),
                         "HostWaitListening: this process already has a listener of its host "
                         "waits (one at a time)",
                         brigade::Error);
  }
  gate.open();
  e.synchronize();  // no listener now: the plain blocking wait
  CHECK(e.query());
}

TEST_CASE("a CPU stream's task that synchronises its own stream is refused, not polled forever") {
  Deadline deadline("host wait listener on a stream's worker", std::chrono::seconds(30));
  HostWaitListening listening([](const std::function<std::string()>&) {});
  Stream s = Stream::create(Device::cpu(0));
  std::string refused;
  // The task's wait is its device's, not the host's: unlistened, it is refused at once as
  // before; polled, it would wait for itself until the deadline.
  s.enqueue([&] {
    try {
      s.synchronize();
    } catch (const brigade::Error& x) {
      refused = x.what();
    }
  });
  s.synchronize();  // on the host: listened
  CHECK(refused == s.str() + ": synchronize() called from a task of the same stream would wait "
                             "for itself forever");
}

#if defined(BRIGADE_CUDA_EMULATED)
// The budget of host-blocking calls per step (tests/pipeline/runtime/gpu_call_budget_test.cpp)
// counts the same waits with a listener as without: one cudaEventSynchronize or
// cudaStreamSynchronize per wait, the polls before it queries, which never block.
TEST_CASE("a listened wait on a GPU makes one host-blocking call, as an unlistened one does" *
          doctest::skip(brigade::cuda_device_count() == 0)) {
  Deadline deadline("host wait listener on a GPU");
  namespace emu = brigade::emu::gpu;
  for (const bool on_event : {true, false}) {
    CAPTURE(on_event);
    Stream s = Stream::create(Device::cuda(0));
    const brigade::Tensor zeros = brigade::Tensor::zeros({4}, s);  // (4)
    for (const bool listened : {false, true}) {
      CAPTURE(listened);
      // Allocated before the hold: without the allocator's cache
      // (BRIGADE_NO_MEMORY_CACHING=1) an allocation may first give freed blocks back with
      // cudaFree, which waits for the whole GPU, held stream included: a deadlock of the
      // test's own making, which a real GPU's work, never held by the host, cannot have.
      const brigade::Tensor behind = brigade::Tensor::empty({4}, s);  // (4)
      auto hold = std::make_unique<emu::StreamHold>(s.cuda_handle());
      brigade::copy_async(behind, zeros, s);  // work held
      Event e;
      e.record(s);
      std::atomic<int> calls{0};
      std::optional<HostWaitListening> listening;
      if (listened)
        listening.emplace([&](const std::function<std::string()>&) {
          if (calls.fetch_add(1) == 0) hold->release();
        });
      else
        hold->release();
      const emu::CallCounts before = emu::call_counts();
      if (on_event)
        e.synchronize();
      else
        s.synchronize();
      const emu::CallCounts added = emu::call_counts().since(before);
      CHECK(added.host_blocking == 1);
      const auto called = [&](const char* name) {
        const auto it = added.by_entry_point.find(name);
        return it == added.by_entry_point.end() ? uint64_t{0} : it->second;
      };
      CHECK(called(on_event ? "cudaEventSynchronize" : "cudaStreamSynchronize") == 1);
      if (listened) CHECK(called(on_event ? "cudaEventQuery" : "cudaStreamQuery") >= 1);
    }
  }
}
#endif

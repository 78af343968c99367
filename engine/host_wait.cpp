// See host_wait.h.
#include "engine/host_wait.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/error.h"
#include "engine/stream_impl.h"

namespace brigade {

namespace {
std::mutex listener_mutex;
std::shared_ptr<const HostWaitListener> installed;  // guarded by listener_mutex
// Whether `installed` is set, read without the lock: every host wait asks, and in a
// single-process run (no listener, ever) the answer must cost neither the lock nor a name.
std::atomic<bool> any_installed{false};
}  // namespace

HostWaitListening::HostWaitListening(HostWaitListener listener) {
  BRIGADE_CHECK(listener, "HostWaitListening: an empty listener");
  std::lock_guard<std::mutex> lock(listener_mutex);
  BRIGADE_CHECK(!installed, "HostWaitListening: this process already has a listener of its "
                            "host waits (one at a time)");
  installed = std::make_shared<const HostWaitListener>(std::move(listener));
  any_installed.store(true, std::memory_order_release);
}

HostWaitListening::~HostWaitListening() {
  std::lock_guard<std::mutex> lock(listener_mutex);
  installed.reset();  // a wait still calling the old listener holds its own reference
  any_installed.store(false, std::memory_order_release);
}

namespace detail {

std::shared_ptr<const HostWaitListener> host_wait_listener() {
  if (!any_installed.load(std::memory_order_acquire)) return nullptr;
  // A CPU stream's task that waits is that device's own thread, not the host: it blocks as
  // before (and a task that synchronises its own stream is refused at once, not polled forever).
  if (!stream_task_of_this_thread().empty()) return nullptr;
  std::lock_guard<std::mutex> lock(listener_mutex);
  return installed;
}

void wait_listening(const HostWaitListener& listener, const std::function<bool()>& done,
                    const std::function<std::string()>& waiting_on) {
  for (int tries = 0;; ++tries) {
    try {
      if (done()) return;
    } catch (const std::exception&) {
      return;  // the blocking call after this wait reports the failure, in its own words
    }
    listener(waiting_on);
    // Short waits (most: the work is nearly done) end within a few yields; long ones (a slow
    // GPU) must not spin a core that the devices' own threads may need.
    if (tries < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace detail

}  // namespace brigade

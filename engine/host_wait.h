// What a host thread listens to while it waits on a device's work.
//
// Event::synchronize(), Event::wait_until() and Stream::synchronize() block the calling host
// thread until a device's work has run (wait_until: or its deadline has passed). Usually
// nothing else needs that thread meanwhile. A distributed job does: when another process
// fails, this one must hear its notice and say why it stops before the job is aborted
// (pipeline/distributed/faults.h), even while its host waits on its own GPU (a slow one, on a
// loaded machine, can keep it there for seconds). So a layer above engine/ may install a
// listener, and while one is installed those waits poll instead of blocking:
//
//   until the work has run:  query it (Event::query, Stream::query; wait_until: or until the
//                            deadline), call listener(waiting_on), pause: a yield at first,
//                            then 1 ms (as pipeline/distributed/poll.h's waits do: no core
//                            spent spinning);
//   then:                    the blocking call itself, which returns at once and throws the
//                            stream's error exactly as it would have.
//
// The listener may end the process (what the distributed layer does when it hears a failure)
// or throw (the wait then throws that). With none installed — every single-process run — the
// waits block in the backend's call directly, as they always did. A stream's synchronize polls
// "everything enqueued so far", so work that another thread enqueues meanwhile is waited for
// too (cudaStreamQuery's meaning): harmless for the waits that drain a stream.
//
// Call counts (kernels/emu/cudart/call_counts.h): either way a synchronize makes exactly one
// host-blocking call (cudaEventSynchronize or cudaStreamSynchronize); the polls before it are
// cudaEventQuery/cudaStreamQuery calls, which never block. A budget of host-blocking calls per
// step therefore counts the same waits with or without a listener.
//
// engine/ knows nothing of MPI: this is the whole interface between them.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace brigade {

// Called between the polls of a host wait on a device's work; `waiting_on` says what the host
// waits for ("cuda:0 stream#4", "event#9 (cuda:0 stream#4, a CUDA event (pending))"), built
// only if the listener asks. Called on whichever host thread waits, possibly several at once
// (never on a CPU stream's worker: its waits are the device's, and block as before).
using HostWaitListener = std::function<void(const std::function<std::string()>& waiting_on)>;

// Installs `listener` for its own lifetime: one at a time in a process (a second throws
// brigade::Error). Waits already polling see the change at their next poll.
class HostWaitListening {
 public:
  explicit HostWaitListening(HostWaitListener listener);
  ~HostWaitListening();
  HostWaitListening(const HostWaitListening&) = delete;
  HostWaitListening& operator=(const HostWaitListening&) = delete;
};

namespace detail {

// The listener installed now; null if none, or if the calling thread is a CPU stream's worker
// running one of its tasks (a device's thread, not the host's).
std::shared_ptr<const HostWaitListener> host_wait_listener();

// Polls `done` (has the work run?), calling `listener` and pausing between polls, until it
// says so. A poll that throws (a GPU whose query fails) ends the polling: the blocking call
// that follows reports that failure itself.
void wait_listening(const HostWaitListener& listener, const std::function<bool()>& done,
                    const std::function<std::string()>& waiting_on);

}  // namespace detail

}  // namespace brigade

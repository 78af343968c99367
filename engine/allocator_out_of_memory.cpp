// When a request does not fit: what the caching allocator (allocator.cpp) does once neither
// its cache nor new memory within the capacity gives a block without waiting.
//
// The rest of the cache is then memory about to be free: blocks freed by the host while queued
// work still uses them. If the request would fit beside the live blocks once those are gone,
// the allocation waits for that work (up to a deadline, BRIGADE_ALLOC_WAIT_S), gives the whole
// cache back and tries once more; else, or if that is not enough, it fails with an
// OutOfMemoryError naming the device, the request and the usage, and what it waited for.
// Kept apart from the cache because its reasoning is its own: why a wait ends (or, across
// processes, may not: the deadline), and which threads must not wait at all.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/stream_impl.h"

namespace brigade {

// Blocks freed by the host while queued work still uses them hold memory that this request
// could have once that work has run. Wait for it, return the whole cache to the system, and try
// once more, as PyTorch's caching allocator does before it gives up.
void* Allocator::wait_for_pending_then_retry_locked(std::unique_lock<std::mutex>& lock,
                                                    uint64_t bytes, uint64_t size,
                                                    const Stream& stream, Event* owner_before) {
  refuse_to_wait_inside_stream_work_locked(bytes);
  ++waits_for_pending_;
  const std::chrono::duration<double> limit = pending_wait_limit();
  lock.unlock();
  const std::string still_pending = empty_cache_until(
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit));
  lock.lock();
  void* const data = take_or_obtain_locked(size, stream, owner_before);
  if (!data) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", limit.count());
    throw out_of_memory_locked(
        bytes, still_pending.empty()
                   ? "; waited for the queued work of freed blocks, which did not free enough"
                   : "; waited " + std::string(seconds) +
                         " s (BRIGADE_ALLOC_WAIT_S) for queued work that did not free enough: "
                         "still pending at " + still_pending);
  }
  return data;
}

// Waiting helps when the cache holds blocks (all of them still in flight: the ready ones were
// just released) and the request fits beside the live blocks once those are gone. A request
// larger than the capacity minus what is in use can never fit: it fails at once.
bool Allocator::waiting_could_help_locked(uint64_t size) const {
  const uint64_t cap = capacity();
  return reserved_ > in_use_ && (cap == 0 || in_use_ + size <= cap);
}

// Deadlock. The waiting thread waits for events recorded at free time, i.e. for work already
// enqueued; enqueued work waits only on records that already exist (never in a cycle, see
// stream_cpu.cpp) and never on a host thread of this process: Brigade's host-side rendezvous
// (channels, the local reducer) block host threads, not stream tasks. So within a process a
// host thread's wait ends. The one thread that may be what the events wait for is a CPU
// stream's worker running a task: the pending work may be that very task, or queued behind
// it. Such a thread does not wait: it is told so. Work that waits on another process is
// outside this argument: an NCCL send queued on a GPU stream completes when the peer rank
// enqueues its receive, which that rank's host thread does not do while it is itself waiting
// here for its own send — two full ranks would wait for each other for ever. So the wait has
// a deadline (pending_wait_limit), after which the allocation fails as out of memory, naming
// the work still pending, where before it waited for ever.
void Allocator::refuse_to_wait_inside_stream_work_locked(uint64_t bytes) {
  const std::string task_of = detail::stream_task_of_this_thread();
  if (task_of.empty()) return;
  throw out_of_memory_locked(
      bytes, "; " + format_bytes(reserved_ - in_use_) +
                 " of freed blocks wait for queued work, which a task of " + task_of +
                 " cannot wait for: it may be that work or queued behind it; allocate on the "
                 "host before enqueuing the task");
}

OutOfMemoryError Allocator::out_of_memory_locked(uint64_t bytes, const std::string& why) const {
  const uint64_t cap = capacity();
  std::ostringstream os;
  os << device_ << ": out of memory allocating " << format_bytes(bytes) << " (in use "
     << format_bytes(in_use_) << ", reserved " << format_bytes(reserved_);
  if (cap != 0) os << ", capacity " << format_bytes(cap);
  os << ")" << why;
  return OutOfMemoryError(os.str());
}

// BRIGADE_ALLOC_WAIT_S (seconds, > 0) if set, else 120 s: far longer than the queued work of
// a step takes, far shorter than "for ever". Read at each wait, which is rare.
std::chrono::duration<double> Allocator::pending_wait_limit() {
  const char* text = std::getenv("BRIGADE_ALLOC_WAIT_S");
  if (text == nullptr) return std::chrono::duration<double>(120.0);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  BRIGADE_CHECK(end != text && *end == '\0' && seconds > 0 && seconds < 1e9,
                "BRIGADE_ALLOC_WAIT_S=\"" << text << "\": expected a number of seconds above 0");
  return std::chrono::duration<double>(seconds);
}

}  // namespace brigade

// Stream: an ordered queue of work on one device. The one concurrency vocabulary of Brigade.
//
// CUDA semantics: work enqueued on one stream runs in order; work on different streams may
// overlap unless ordered by events (event.h): `e.record(a); b.wait(e);` makes b's later work
// wait for a's work up to the record. Neither enqueue nor wait blocks the calling thread.
//
//   CPU device:  a worker thread per stream drains a FIFO of tasks (stream_cpu.cpp).
//   CUDA device: a cudaStream_t (stream_cuda.cpp). enqueue(task) is an error there: a CUDA
//                stream runs kernels, not host functions, and there is no silent fallback.
//
// A Stream is a cheap shared handle (copies name the same stream). When the last handle
// goes, the stream finishes its queued work and its worker ends.
//
// Errors: if a task throws, the stream keeps the first error (sticky, as in CUDA), skips
// its later tasks but still completes their event records, so nothing waiting on it hangs.
// synchronize() and event.synchronize() then throw StreamError naming the stream; a stream
// that waits on an event whose recorded work failed inherits the failure. A failed stream
// stays failed.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/device.h"
#include "engine/error.h"

#if defined(BRIGADE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace brigade {

class Event;
class ThreadPool;

namespace detail {
class StreamImpl;
}

// The sticky error of a stream, rethrown by synchronize(): "cpu:1 stream#3: task failed:
// <what>", the first cause first; an error that reached this stream through event waits
// then names them, oldest first: " [passed on by the waits of cpu:2 stream#5 on event#7,
// cpu:0 stream#4 on event#9]". cause() is the original exception.
class StreamError : public Error {
 public:
  StreamError(const std::string& message, std::exception_ptr cause)
      : Error(message), cause_(std::move(cause)) {}
  const std::exception_ptr& cause() const { return cause_; }

 private:
  std::exception_ptr cause_;
};

class Stream {
 public:
  // A new stream on `device` (checked: a CUDA index must exist on this machine).
  static Stream create(const Device& device);
  // The device's default stream: one per device, created on first use, never destroyed.
  static Stream default_for(const Device& device);

  Device device() const;
  uint64_t id() const;     // unique in the process, for messages and traces
  std::string str() const;  // "cpu:1 stream#3"

  // CPU streams: runs `task` on the stream's worker after everything enqueued before it.
  // CUDA streams: throws (launch kernels on cuda_handle() instead).
  void enqueue(std::function<void()> task) const;
  // Later work of this stream waits until `event`'s recorded work has run. Does not block
  // the caller. Waiting on an event that was never recorded throws (see event.h).
  void wait(const Event& event) const;
  // Blocks until everything enqueued so far has run; throws the stream's sticky error.
  void synchronize() const;
  // True when everything enqueued so far has run (never throws the sticky error).
  bool query() const;

  // The compute threads of a CPU stream's device (cpu_thread_pool(device())).
  ThreadPool& thread_pool() const;

#if defined(BRIGADE_HAVE_CUDA)
  // The stream's cudaStream_t, with its device made current on the calling thread (work is
  // issued on a handle right after taking it, and a launch needs that). Throws for a CPU stream.
  cudaStream_t cuda_handle() const;
#endif

  // What a library keeps per stream for the stream's life (cuBLAS's workspace: per stream, so
  // that no two streams share one): the first call with `key` keeps what make() returns, later
  // calls return it. It is dropped when the stream is destroyed, so a CUDA stream's work on it
  // has run. It must not hold the stream (a Stream, a Block the stream owns): a stream that
  // keeps a handle to itself is never destroyed.
  std::shared_ptr<void> kept(const void* key,
                             const std::function<std::shared_ptr<void>()>& make) const;

  // Runs `enqueue` (which enqueues on this stream: an event's record) unless the stream is
  // capturing a CUDA graph (CudaGraph::capture), which would put it in the graph; false then.
  // A capture does not begin while `enqueue` runs. Another thread's work on a stream that
  // may be capturing — the allocator's events when it frees a block — goes through here.
  bool unless_capturing(const std::function<void()>& enqueue) const;
  // CudaGraph::capture, around its capture: the stream counts as capturing.
  void set_capturing(bool capturing) const;
  // Whether the stream is capturing: only the thread that captures it may rely on the answer.
  bool capturing() const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.impl_ == b.impl_; }
  const std::shared_ptr<detail::StreamImpl>& impl() const { return impl_; }

  // A handle that does not keep the stream alive, and the stream back from it while it lives.
  // A stream is destroyed only after its work has run (a CPU stream's worker drains its
  // queue; a CUDA stream is synchronised first), so a holder that finds it gone knows that.
  using Weak = std::weak_ptr<detail::StreamImpl>;
  Weak weak() const { return impl_; }
  static std::optional<Stream> from_weak(const Weak& weak) {
    if (std::shared_ptr<detail::StreamImpl> impl = weak.lock()) return Stream(std::move(impl));
    return std::nullopt;
  }

 private:
  explicit Stream(std::shared_ptr<detail::StreamImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::StreamImpl> impl_;
};

// One line per live stream, saying what it is doing or waiting on, e.g.
//   cpu:1 stream#3: blocked on event#7 (cpu:0 stream#2, position 12; that stream is at 9)
// For hang reports (tests/support/deadline.h, the pipeline runtime's watchdog).
std::string describe_streams();

}  // namespace brigade

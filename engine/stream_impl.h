// The backend interface behind Stream and Event (not for use above engine/).
//
// A StreamImpl is one backend's stream (stream_cpu.cpp, stream_cuda.cpp). An EventRecord is
// one call of Event::record: a point in one stream's work. Records are immutable once made,
// which is what gives "a wait captures the record current when it was issued" for free:
// re-recording an event makes a new record and leaves the old one to those holding it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/device.h"

namespace brigade::detail {

class EventRecord {
 public:
  EventRecord(uint64_t event_id, Device device, uint64_t stream_id)
      : event_id(event_id), device(device), stream_id(stream_id) {}
  virtual ~EventRecord() = default;

  virtual bool query() const = 0;        // has the recorded work run?
  virtual void synchronize() const = 0;  // block until it has; throw if it failed
  // Block until it has run or `deadline` has passed, whichever is first; whether it has run.
  // Never throws for a failed stream (its markers still run).
  virtual bool wait_until(std::chrono::steady_clock::time_point deadline) const = 0;
  // Milliseconds from `start` (a record of the same backend) to this record; both complete.
  virtual double elapsed_ms_since(const EventRecord& start) const = 0;
  // "cpu:0 stream#2, position 12; that stream is at 9": for hang reports.
  virtual std::string where() const = 0;

  const uint64_t event_id;
  const Device device;
  const uint64_t stream_id;
};

class StreamImpl {
 public:
  explicit StreamImpl(Device device);
  virtual ~StreamImpl() = default;
  StreamImpl(const StreamImpl&) = delete;
  StreamImpl& operator=(const StreamImpl&) = delete;

  virtual void enqueue(std::function<void()> task) = 0;
  // A record of `event_id` after everything enqueued so far; `timed`: Event::timed().
  virtual std::shared_ptr<EventRecord> record(uint64_t event_id, bool timed) = 0;
  virtual void wait(std::shared_ptr<EventRecord> record) = 0;
  virtual void synchronize() = 0;
  virtual bool query() = 0;
  virtual std::string describe() = 0;  // one line: what the stream is doing now
  virtual void* native_handle() const { return nullptr; }  // cudaStream_t for CUDA

  std::string name() const;  // "cpu:1 stream#3"

  const Device device;
  const uint64_t id;

  // Stream::kept. A CUDA stream drops them in its destructor once its work has run and before
  // its cudaStream_t is destroyed (drop_kept), so that what it kept (a library handle set to
  // the stream) can let go of the stream while it still exists; else they are members of the
  // base, destroyed after the backend's destructor. (A CPU stream whose own task drops its last
  // handle is destroyed while its worker runs on: what it kept may go before its remaining
  // tasks have run.)
  std::mutex kept_mutex;
  std::map<const void*, std::shared_ptr<void>> kept;
  void drop_kept();  // destroys what the stream kept, outside the mutex

  // Stream::unless_capturing: whether the stream is capturing a CUDA graph (engine/
  // cuda_graph.h), changed and read under the mutex.
  std::mutex capture_mutex;
  bool capturing = false;
};

// Backends. make_cuda_stream exists only in CUDA builds.
std::shared_ptr<StreamImpl> make_cpu_stream(Device device);
std::shared_ptr<StreamImpl> make_cuda_stream(Device device);

// "cpu:1 stream#3" when the calling thread is that CPU stream's worker running one of its
// items, else empty: a thread that must not block on queued work (the allocator asks).
std::string stream_task_of_this_thread();

// The live streams, for describe_streams(). A backend registers its stream at the end of
// its constructor and unregisters it at the start of its destructor.
void register_stream(StreamImpl* stream);
void unregister_stream(StreamImpl* stream);

}  // namespace brigade::detail

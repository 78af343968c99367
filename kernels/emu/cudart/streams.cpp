// Emulated CUDA streams and events.
//
// A stream is a worker thread draining a FIFO; an event record is (stream, position). The
// rules CUDA documents and this file enforces (kernels/emu/cudart/README.md quotes them):
//   - work on one stream runs in order; streams of one GPU run concurrently;
//   - the legacy (NULL) stream waits for all blocking streams of its GPU and they wait for
//     it; a stream created with cudaStreamNonBlocking is not ordered with it at all;
//   - cudaEventRecord fails when the event and the stream belong to different devices;
//     cudaStreamWaitEvent, cudaEventQuery and cudaEventSynchronize work across devices;
//   - cudaStreamWaitEvent and cudaEventQuery on an event never recorded do nothing / succeed;
//   - cudaEventElapsedTime needs two completed, timed events of one device;
//   - a destroyed stream or event handle is an invalid resource handle.
#include <stdexcept>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/cudart/include/cuda_emulation.h"

namespace brigade::emu::gpu {

namespace {

void worker_loop(std::shared_ptr<StreamState> self) {
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  for (;;) {
    self->wake.wait(lock, [&] { return !self->queue.empty() || self->destroyed; });
    if (self->queue.empty()) return;  // destroyed and drained
    auto [position, task] = std::move(self->queue.front());
    self->queue.pop_front();
    if (self->gpu->fault == cudaSuccess) {  // a faulted GPU runs nothing more
      lock.unlock();
      chaos_before_task(*self);  // BRIGADE_EMU_CHAOS: maybe late
      std::string error;
      try {
        task.run();
      } catch (const std::exception& ex) {
        error = ex.what();
      } catch (...) {
        error = "an unknown exception";
      }
      lock.lock();
      if (!error.empty())
        set_fault(*self->gpu, cudaErrorLaunchFailure,
                  task.what + " on " + name_of(*self) + " failed: " + error);
    }
    self->completed = position;
    e.changed.notify_all();
  }
}

std::shared_ptr<StreamState> make_stream(Gpu& gpu, bool legacy, bool blocking) {
  auto s = std::make_shared<StreamState>();
  s->gpu = &gpu;
  s->legacy = legacy;
  s->blocking = blocking;
  s->id = Emulation::get().next_stream_id++;
  s->name = std::make_shared<const std::string>(
      name_of(gpu) + (legacy ? " legacy stream"
                             : (blocking ? " stream #" : " non-blocking stream #") + std::to_string(s->id)));
  s->chaos_state = chaos_state_for_stream(gpu, gpu.streams_made++);
  s->worker = std::thread(worker_loop, s);
  s->worker.detach();  // ends by itself once destroyed and drained; it holds `s` alive
  std::erase_if(gpu.streams, [](const auto& weak) { return weak.expired(); });
  gpu.streams.push_back(s);
  return s;
}

// Appends a task as it is, with no ordering added but the host's (hb.h); returns its position.
uint64_t append(StreamState& stream, Task task) {
  const uint64_t position = ++stream.enqueued;
  inherit_host(stream);
  stream.clock.advance(stream.id, position);
  stream.queue.emplace_back(position, std::move(task));
  stream.wake.notify_one();
  return position;
}

}  // namespace

void enqueue_wait(StreamState& waiter, std::shared_ptr<StreamState> target, uint64_t position,
                  const VectorClock& clock) {
  if (target.get() == &waiter) return;
  waiter.clock.join(clock);
  if (target->completed >= position) return;
  append(waiter, Task{[target, position] {
                         Emulation& e = Emulation::get();
                         std::unique_lock lock(e.mutex);
                         wait_for(lock, *target, position);
                       },
                       "cudaStreamWaitEvent"});
}

namespace {

// Pageable host-to-device cudaMemcpy copies land once something is ordered after them.
void land_unlanded(Gpu& gpu, StreamState& legacy) {
  std::vector<Task> pending = std::move(gpu.unlanded);
  gpu.unlanded.clear();
  for (Task& t : pending) append(legacy, std::move(t));
}

}  // namespace

std::shared_ptr<StreamState> legacy_stream(Gpu& gpu) {
  if (!gpu.legacy) gpu.legacy = make_stream(gpu, /*legacy=*/true, /*blocking=*/true);
  return gpu.legacy;
}

std::shared_ptr<StreamState> stream_of(cudaStream_t handle, const char* call) {
  Emulation& e = Emulation::get();
  if (handle == nullptr || handle == cudaStreamLegacy) {
    Gpu* gpu = current_gpu(call);
    if (gpu == nullptr || legacy_stream_refused(*gpu, call) != cudaSuccess) return nullptr;
    return legacy_stream(*gpu);
  }
  if (handle == cudaStreamPerThread) {
    fail(cudaErrorNotSupported, std::string(call) + ": cudaStreamPerThread is not emulated");
    return nullptr;
  }
  if (e.live_streams.count(handle) == 0) {
    fail(cudaErrorInvalidResourceHandle,
         std::string(call) + ": the stream handle is not a live stream (destroyed, or never "
                             "created)");
    return nullptr;
  }
  if (fault_of(*handle->state->gpu) != cudaSuccess) return nullptr;
  if (const std::string why = invalidated_capture(*handle->state); !why.empty()) {
    fail(cudaErrorStreamCaptureInvalidated,
         std::string(call) + ": " + *handle->state->name + " is in a capture invalidated earlier: " +
             why + " (end it with cudaStreamEndCapture)");
    return nullptr;
  }
  return handle->state;
}

uint64_t enqueue(StreamState& stream, Task task) {
  if (stream.capture) {  // recorded, not run; no position (capture.cpp)
    capture_task(stream, std::move(task));
    return 0;
  }
  Gpu& gpu = *stream.gpu;
  if (stream.legacy) {
    land_unlanded(gpu, stream);
    for (const auto& weak : gpu.streams)
      if (auto other = weak.lock(); other && other->blocking && !other->legacy)
        enqueue_wait(stream, other, other->enqueued, other->clock);
  } else if (stream.blocking && gpu.legacy) {
    land_unlanded(gpu, *gpu.legacy);
    enqueue_wait(stream, gpu.legacy, gpu.legacy->enqueued, gpu.legacy->clock);
  }
  if (gpu.barrier_stream)
    enqueue_wait(stream, gpu.barrier_stream, gpu.barrier_position, gpu.barrier_clock);
  return append(stream, std::move(task));
}

void wait_for(std::unique_lock<std::mutex>& lock, const StreamState& stream, uint64_t position) {
  Emulation::get().changed.wait(lock, [&] {
    return stream.completed >= position || stream.gpu->fault != cudaSuccess;
  });
}

void drain(std::unique_lock<std::mutex>& lock, Gpu& gpu, bool observed) {
  if (gpu.legacy) land_unlanded(gpu, *gpu.legacy);
  // The streams as the drain begins, held: each wait lets go of the lock, and another host
  // thread may then create streams, reallocating gpu.streams (a new stream holds no work this
  // drain must wait for).
  std::vector<std::shared_ptr<StreamState>> streams;
  for (const auto& weak : gpu.streams)
    if (auto s = weak.lock()) streams.push_back(std::move(s));
  VectorClock drained;  // the streams' clocks as the host waits for them, not as they grow since
  for (const auto& s : streams) {
    drained.join(s->clock);
    wait_for(lock, *s, s->enqueued);
  }
  if (!observed) return;
  finished_downloads(gpu, drained);  // of destroyed streams, which ran all they held
  host_observes(drained);
}

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

// cudaStreamCreate and cudaStreamCreateWithFlags, each counted as itself (call_counts.h).
static cudaError_t create_stream(cudaStream_t* stream, unsigned int flags) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  ++e.counts.stream_create;
  Gpu* gpu = current_gpu("cudaStreamCreateWithFlags");  // a stream belongs to the current device
  if (gpu == nullptr) return last_error();
  if ((flags & ~unsigned{cudaStreamNonBlocking}) != 0)
    return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: unknown flags");
  auto* handle = new CUstream_st{make_stream(*gpu, false, (flags & cudaStreamNonBlocking) == 0)};
  e.live_streams.insert(handle);
  *stream = handle;
  return ok();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  count_call("cudaStreamCreateWithFlags");
  return create_stream(stream, flags);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  count_call("cudaStreamCreate");
  return create_stream(stream, cudaStreamDefault);
}

// CUDA: "in case the device is still doing work in the stream when cudaStreamDestroy() is
// called, the function will return immediately and the resources ... released automatically
// once the device has completed all work in stream". The worker drains, then ends.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  count_call("cudaStreamDestroy");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  ++e.counts.stream_destroy;
  if (stream == nullptr || stream == cudaStreamLegacy || e.live_streams.count(stream) == 0)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamDestroy: not a stream created by cudaStreamCreate*");
  // A capture's stream is ended with its capture (cudaStreamEndCapture), not destroyed.
  if (capturing_stream_refused(*stream->state, "cudaStreamDestroy") != cudaSuccess)
    return last_error();
  e.live_streams.erase(stream);
  stream->state->destroyed = true;
  stream->state->wake.notify_one();
  delete stream;
  return ok();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  count_call("cudaStreamSynchronize");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  ++e.counts.stream_synchronize;
  auto s = stream_of(stream, "cudaStreamSynchronize");
  if (!s) return last_error();
  if (capturing_stream_refused(*s, "cudaStreamSynchronize") != cudaSuccess) return last_error();
  if (unsafe_call_refused("cudaStreamSynchronize") != cudaSuccess) return last_error();
  if (s->legacy) land_unlanded(*s->gpu, *s);
  const VectorClock synchronised = s->clock;
  count_host_block();
  wait_for(lock, *s, s->enqueued);
  host_observes(synchronised);
  return fault_of(*s->gpu);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  count_call("cudaStreamQuery");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = stream_of(stream, "cudaStreamQuery");
  if (!s) return last_error();
  if (capturing_stream_refused(*s, "cudaStreamQuery") != cudaSuccess) return last_error();
  if (unsafe_call_refused("cudaStreamQuery") != cudaSuccess) return last_error();
  if (s->completed < s->enqueued || (s->legacy && !s->gpu->unlanded.empty()))
    return fail(cudaErrorNotReady, "");
  host_observes(s->clock);  // the host saw all of it done
  return ok();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  count_call("cudaStreamWaitEvent");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = stream_of(stream, "cudaStreamWaitEvent");
  if (!s) return last_error();
  if (e.live_events.count(event) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: the event is not live");
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
  if (!event->last) return ok();
  bool captured = false;
  if (capture_wait(*s, *event->last, &captured) != cudaSuccess) return last_error();
  if (!captured) enqueue_wait(*s, event->last->stream, event->last->position, event->last->clock);
  return ok();
}

// cudaEventCreate and cudaEventCreateWithFlags, each counted as itself (call_counts.h).
static cudaError_t create_event(cudaEvent_t* event, unsigned int flags) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  ++e.counts.event_create;
  Gpu* gpu = current_gpu("cudaEventCreate");  // an event belongs to the current device
  if (gpu == nullptr) return last_error();
  if ((flags & ~unsigned{cudaEventBlockingSync | cudaEventDisableTiming}) != 0)
    return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: unknown flags");
  auto* handle = new CUevent_st{gpu, flags, nullptr};
  e.live_events.insert(handle);
  *event = handle;
  return ok();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  count_call("cudaEventCreateWithFlags");
  return create_event(event, flags);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  count_call("cudaEventCreate");
  return create_event(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  count_call("cudaEventDestroy");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  ++e.counts.event_destroy;
  if (e.live_events.erase(event) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: the event is not live");
  delete event;  // a pending record lives on in the streams that wait on it
  return ok();
}

// "cudaEventRecord() will fail if the input event and input stream are associated to
// different devices" (CUDA Programming Guide, "Stream and Event Behavior").
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  count_call("cudaEventRecord");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_events.count(event) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: the event is not live");
  auto s = stream_of(stream, "cudaEventRecord");
  if (!s) return last_error();
  if (s->gpu != event->gpu)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventRecord: the event belongs to " + name_of(*event->gpu) +
                    " and the stream to " + name_of(*s->gpu) +
                    " (an event is created on the thread's current device)");
  if (s->capture) {  // a node of the capture: what a wait on it forks or joins (capture.cpp)
    event->last = capture_record(s);
    return ok();
  }
  auto record = std::make_shared<Record>();
  record->stream = s;
  const bool timed = (event->flags & cudaEventDisableTiming) == 0;
  record->position = enqueue(*s, Task{[record, timed] {
                                        if (timed) record->at = std::chrono::steady_clock::now();
                                      },
                                      "cudaEventRecord"});
  record->clock = s->clock;
  event->last = std::move(record);
  return ok();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  count_call("cudaEventQuery");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_events.count(event) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: the event is not live");
  if (event->last && captured_event_refused(*event->last, "cudaEventQuery") != cudaSuccess)
    return last_error();
  if (unsafe_call_refused("cudaEventQuery") != cudaSuccess) return last_error();
  if (!event->last) return ok();  // never recorded: complete
  if (const cudaError_t f = fault_of(*event->gpu); f != cudaSuccess) return f;
  if (event->last->stream->completed < event->last->position) return fail(cudaErrorNotReady, "");
  host_observes(event->last->clock);  // the host saw the work before the record done
  return ok();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  count_call("cudaEventSynchronize");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::unique_lock lock(e.mutex);
  if (e.live_events.count(event) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: the event is not live");
  if (event->last && captured_event_refused(*event->last, "cudaEventSynchronize") != cudaSuccess)
    return last_error();
  if (unsafe_call_refused("cudaEventSynchronize") != cudaSuccess) return last_error();
  if (!event->last) return ok();
  const auto record = event->last;
  count_host_block();
  wait_for(lock, *record->stream, record->position);
  host_observes(record->clock);
  return fault_of(*event->gpu);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  count_call("cudaEventElapsedTime");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_events.count(start) == 0 || e.live_events.count(end) == 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event is not live");
  if (((start->flags | end->flags) & cudaEventDisableTiming) != 0)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
  if (start->gpu != end->gpu)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: the events belong to different devices");
  if (!start->last || !end->last)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
  for (const auto* r : {start->last.get(), end->last.get()})
    if (captured_event_refused(*r, "cudaEventElapsedTime") != cudaSuccess) return last_error();
  for (const auto* r : {start->last.get(), end->last.get()})
    if (r->stream->completed < r->position) return fail(cudaErrorNotReady, "");
  *ms = std::chrono::duration<float, std::milli>(end->last->at - start->last->at).count();
  return ok();
}

}  // extern "C"

// ---- cuda_emulation.h -----------------------------------------------------------------------

namespace brigade::emu::gpu {

StreamHold::StreamHold(cudaStream_t stream) : released_(std::make_shared<bool>(false)) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  auto s = stream_of(stream, "StreamHold");
  if (!s) throw std::runtime_error(std::string("StreamHold: ") + cudaGetErrorString(cudaGetLastError()));
  enqueue(*s, Task{[released = released_] {
                     Emulation& em = Emulation::get();
                     std::unique_lock l(em.mutex);
                     em.changed.wait(l, [&] { return *released; });
                   },
                   "a StreamHold of a test"});
}

ApiCounts api_counts() {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  return e.counts;
}

void StreamHold::release() {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  *released_ = true;
  e.changed.notify_all();
}

}  // namespace brigade::emu::gpu

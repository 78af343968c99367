// Emulated stream capture: how a capturing stream records what it is given instead of running
// it, and the rules that refuse what a capture may not hold.
//
// While a stream captures (cudaStreamBeginCapture), what it is given — kernel launches, async
// copies and memsets, emulated cuBLAS/cuDNN calls — is recorded, not run: enqueue (streams.cpp)
// hands each task here, and record_access (hb.cpp) the accesses of the task it follows. A
// stream that waits on an event recorded in the capture joins it (a fork); the capture's origin
// waiting on an event recorded on such a stream after its last operation joins it back.
// cudaStreamEndCapture gives the operations, in the order the host issued them, as a graph
// (captured_graph.h), which graphs.cpp instantiates and launches.
//
// The rules, as NVIDIA's CUDA Programming Guide ("Stream Capture", "Prohibited and Unhandled
// Operations") and Runtime API reference state them, each failing with CUDA's code:
//   - capture may not begin on the legacy stream, nor on a stream already capturing;
//   - "It is invalid to synchronize or query the execution status of a stream which is being
//     captured or a captured event": cudaErrorStreamCaptureUnsupported (the emulation refuses
//     cudaStreamDestroy of a capturing stream the same way), and the capture is
//     invalidated (cudaStreamEndCapture then returns cudaErrorStreamCaptureInvalidated and no
//     graph; every other use of its streams returns cudaErrorStreamCaptureInvalidated);
//   - potentially unsafe calls (cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost,
//     cudaDeviceSynchronize, synchronous cudaMemcpy; the vendor libraries' cublasCreate and
//     cudnnCreate, which allocate device resources) are refused while a capture is in
//     progress in cudaStreamCaptureModeGlobal (from any thread) or ThreadLocal (its thread),
//     as the calling thread's interaction mode says (cudaThreadExchangeStreamCaptureMode:
//     Global by default, which is that; ThreadLocal heeds only the thread's own captures;
//     Relaxed none);
//   - the legacy stream may not be used while a blocking stream of its device captures
//     (cudaErrorStreamCaptureImplicit);
//   - "It is invalid to wait on a non-captured event from a stream which is being captured"
//     (cudaErrorStreamCaptureIsolation), and to merge two captures by a wait
//     (cudaErrorStreamCaptureMerge);
//   - capture ends on the stream that began it (cudaErrorStreamCaptureUnmatched), from the
//     thread that began it unless relaxed (cudaErrorStreamCaptureWrongThread), with every
//     forked stream joined back (cudaErrorStreamCaptureUnjoined).
// What the emulation does not capture it refuses, never runs eagerly: a copy to or from
// pageable host memory (its staging is a host operation), NCCL (kernels/emu/nccl), a fork onto
// another device's stream, a graph launched into a capturing stream.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/captured_graph.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

// A capture in progress: what its streams have recorded, and what joins it still waits for.
struct Capture {
  std::shared_ptr<StreamState> origin;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;  // the thread that began it
  std::vector<CapturedOperation> operations;
  std::string invalidated;  // why the capture was invalidated; "" while it holds
  // Each stream of the capture is a branch of the graph (the origin branch 0, forks from 1 in
  // the order they joined), with a clock of the capture's own: entry b is how many operations
  // of branch b are ordered before the stream's next one (its own count, what a fork or a
  // wait on an event recorded in the capture brought in). Replays check accesses by it.
  struct Branch {
    uint32_t index = 0;
    uint64_t operations = 0;
    VectorClock clock;
  };
  Branch origin_branch;
  // The streams forked into the capture (not the origin), and whether the origin has waited
  // for all of each one's operations since its last.
  struct Fork {
    Branch branch;
    bool joined = false;
  };
  std::map<StreamState*, Fork> forks;
};

namespace {


Capture::Branch& branch_of(Capture& capture, StreamState& stream) {
  if (&stream == capture.origin.get()) return capture.origin_branch;
  return capture.forks.at(&stream).branch;  // a stream joins a capture by a fork (capture_wait)
}

// Counts an operation of `stream`'s branch; returns the branch and its clock, the operation's.
const Capture::Branch& count_operation(Capture& capture, StreamState& stream) {
  if (&stream != capture.origin.get()) capture.forks.at(&stream).joined = false;
  Capture::Branch& branch = branch_of(capture, stream);
  branch.clock.advance(branch.index, ++branch.operations);
  return branch;
}

// Ends `capture` on every stream in it.
void end(const std::shared_ptr<Capture>& capture) {
  capture->origin->capture = nullptr;
  for (auto& [stream, fork] : capture->forks) stream->capture = nullptr;
  Emulation::get().captures.erase(capture);
}

// The live stream a handle names, capturing or not (stream_of refuses an invalidated
// capture's streams, and these calls are how a capture is inspected and ended).
std::shared_ptr<StreamState> live_stream(cudaStream_t handle, const char* call) {
  Emulation& e = Emulation::get();
  if (handle == nullptr || handle == cudaStreamLegacy) return stream_of(handle, call);
  if (e.live_streams.count(handle) == 0) {
    fail(cudaErrorInvalidResourceHandle,
         std::string(call) + ": the stream handle is not a live stream (destroyed, or never "
                             "created)");
    return nullptr;
  }
  return handle->state;
}

}  // namespace

// Invalidates `capture` (the first reason stays) and fails the call with `code`.
cudaError_t invalidate_capture(Capture& capture, cudaError_t code, const std::string& why) {
  if (capture.invalidated.empty()) capture.invalidated = why;
  return fail(code, why + "; the capture begun on " + name_of(*capture.origin) +
                        " is invalidated (cudaStreamEndCapture returns "
                        "cudaErrorStreamCaptureInvalidated)");
}

void capture_task(StreamState& stream, Task task) {
  Capture& capture = *stream.capture;
  const Capture::Branch& branch = count_operation(capture, stream);
  capture.operations.push_back({std::move(task), {}, {}, branch.index, branch.clock});
}

void capture_access(StreamState& stream, const void* pointer, uint64_t bytes, bool write,
                    const std::string& what) {
  Capture& capture = *stream.capture;
  if (capture.operations.empty()) return;  // an access with no task: nothing to replay
  const Allocation* a = Emulation::get().find(pointer, 0);
  capture.operations.back().accesses.push_back(
      {pointer, bytes, write, what, a != nullptr ? a->lendings : 0});
}

void capture_recheck(StreamState& stream, std::function<std::string()> recheck) {
  Capture& capture = *stream.capture;
  if (capture.operations.empty()) return;
  capture.operations.back().recheck = std::move(recheck);
}

std::string invalidated_capture(const StreamState& stream) {
  return stream.capture ? stream.capture->invalidated : std::string();
}

cudaError_t capturing_stream_refused(StreamState& stream, const char* call) {
  if (!stream.capture) return cudaSuccess;
  return invalidate_capture(
      *stream.capture, cudaErrorStreamCaptureUnsupported,
      std::string(call) + " on " + name_of(stream) +
          ", which is capturing (a capturing stream may not be synchronised or "
          "queried)");
}

namespace {
// The calling thread's stream capture interaction mode (cudaThreadExchangeStreamCaptureMode).
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;
}  // namespace

cudaError_t unsafe_call_refused(const char* call) {
  cudaError_t result = cudaSuccess;
  if (thread_capture_mode == cudaStreamCaptureModeRelaxed) return result;
  for (const auto& capture : Emulation::get().captures) {  // each one it applies to
    // "If the local thread has an ongoing capture sequence that was not initiated with
    // cudaStreamCaptureModeRelaxed ... or if any other thread has a concurrent capture
    // sequence initiated with cudaStreamCaptureModeGlobal, this thread is prohibited from
    // potentially unsafe API calls" (Global; ThreadLocal: the local thread's captures only).
    const bool own = capture->thread == std::this_thread::get_id();
    const bool applies =
        (own && capture->mode != cudaStreamCaptureModeRelaxed) ||
        (!own && capture->mode == cudaStreamCaptureModeGlobal &&
         thread_capture_mode == cudaStreamCaptureModeGlobal);
    if (applies)
      result = invalidate_capture(
          *capture, cudaErrorStreamCaptureUnsupported,
          std::string(call) + " while " + name_of(*capture->origin) + " captures in " +
              (capture->mode == cudaStreamCaptureModeGlobal ? "cudaStreamCaptureModeGlobal"
                                                            : "cudaStreamCaptureModeThreadLocal") +
              " (a call that may synchronise implicitly, or that waits for or asks about work "
              "outside the capture, is not permitted)");
  }
  return result;
}

cudaError_t device_wide_wait_refused(const Gpu* gpu, const char* call) {
  cudaError_t result = cudaSuccess;
  for (const auto& capture : Emulation::get().captures)
    if (gpu == nullptr || capture->origin->gpu == gpu)
      result = invalidate_capture(
          *capture, cudaErrorStreamCaptureUnsupported,
          std::string(call) + " waits for " +
              (gpu ? "the whole of " + name_of(*gpu) : std::string("every GPU")) + " while " +
              name_of(*capture->origin) +
              " captures (a wait for a whole device during a capture on it is refused on any "
              "thread, in any capture mode)");
  return result;
}

cudaError_t legacy_stream_refused(Gpu& gpu, const char* call) {
  for (const auto& weak : gpu.streams)
    if (auto s = weak.lock(); s && s->blocking && !s->legacy && s->capture)
      return invalidate_capture(*s->capture, cudaErrorStreamCaptureImplicit,
                                std::string(call) + " on the legacy stream of " + name_of(gpu) +
                                    " while its blocking " + name_of(*s) +
                                    " captures (the legacy stream would depend on the capture)");
  return cudaSuccess;
}

std::shared_ptr<Record> capture_record(const std::shared_ptr<StreamState>& stream) {
  auto record = std::make_shared<Record>();
  record->stream = stream;
  record->capture = stream->capture;
  const Capture::Branch& branch = branch_of(*stream->capture, *stream);
  record->captured_ops = branch.operations;
  record->clock = branch.clock;  // the capture's clock: what a wait on it brings in
  return record;
}

cudaError_t captured_event_refused(const Record& record, const char* call) {
  if (!record.capture) return cudaSuccess;
  if (!record.capture->invalidated.empty() ||
      Emulation::get().captures.count(record.capture) == 0)
    return fail(cudaErrorCapturedEvent,
                std::string(call) + ": the event was last recorded in a capture (on " +
                    name_of(*record.stream) + "); it stands for no work a GPU runs");
  return invalidate_capture(*record.capture, cudaErrorCapturedEvent,
                            std::string(call) + ": the event was last recorded in the capture on " +
                                name_of(*record.stream) + " (a captured event may not be queried)");
}

cudaError_t capture_wait(StreamState& waiter, const Record& record, bool* handled) {
  *handled = false;
  const std::shared_ptr<Capture>& theirs = record.capture;
  if (!theirs) {
    if (!waiter.capture) return cudaSuccess;
    return invalidate_capture(*waiter.capture, cudaErrorStreamCaptureIsolation,
                              "cudaStreamWaitEvent: " + name_of(waiter) +
                                  " captures and the event was recorded outside the capture (only "
                                  "the stream's own order may cross the capture's boundary)");
  }
  *handled = true;
  if (Emulation::get().captures.count(theirs) == 0)
    return fail(cudaErrorCapturedEvent,
                "cudaStreamWaitEvent: the event was recorded in a capture that has ended");
  if (waiter.capture && waiter.capture != theirs)
    return invalidate_capture(*waiter.capture, cudaErrorStreamCaptureMerge,
                              "cudaStreamWaitEvent: " + name_of(waiter) +
                                  " and the event belong to two different captures");
  if (!waiter.capture) {  // a fork: the waiter joins the capture
    if (waiter.gpu != theirs->origin->gpu)
      return invalidate_capture(
          *theirs, cudaErrorNotSupported,
          "cudaStreamWaitEvent: the emulation captures one device's streams, and " +
              name_of(waiter) + " is not on " + name_of(*theirs->origin->gpu));
    if (waiter.legacy) return legacy_stream_refused(*waiter.gpu, "cudaStreamWaitEvent");
    waiter.capture = theirs;
    Capture::Branch& branch = theirs->forks[&waiter].branch;  // a new branch
    branch.index = static_cast<uint32_t>(theirs->forks.size());
    branch.clock = record.clock;  // ordered after what the record was ordered after
    return cudaSuccess;
  }
  // Within the capture: the waiter's branch is ordered after the record's point, and the
  // origin waiting for a fork's last operation joins it back.
  branch_of(*theirs, waiter).clock.join(record.clock);
  if (&waiter == theirs->origin.get() && record.stream.get() != &waiter) {
    auto it = theirs->forks.find(record.stream.get());
    if (it != theirs->forks.end() && it->second.branch.operations == record.captured_ops)
      it->second.joined = true;
  }
  return cudaSuccess;
}

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

// "Swaps the stream capture interaction mode for a thread": *mode in, the old one out.
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  count_call("cudaThreadExchangeStreamCaptureMode");
  if (mode == nullptr ||
      (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
       *mode != cudaStreamCaptureModeRelaxed))
    return fail(cudaErrorInvalidValue,
                "cudaThreadExchangeStreamCaptureMode: no mode, or an unknown one");
  std::swap(*mode, thread_capture_mode);
  return ok();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  count_call("cudaStreamBeginCapture");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (stream == nullptr || stream == cudaStreamLegacy)
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamBeginCapture: capture may not be initiated on the legacy stream");
  auto s = stream_of(stream, "cudaStreamBeginCapture");
  if (!s) return last_error();
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: unknown capture mode");
  if (s->capture)
    return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: " + name_of(*s) +
                                           " is already capturing");
  auto capture = std::make_shared<Capture>();
  capture->origin = s;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  s->capture = capture;
  e.captures.insert(capture);
  return ok();
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  count_call("cudaStreamEndCapture");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (graph == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamEndCapture: graph is null");
  auto s = live_stream(stream, "cudaStreamEndCapture");
  if (!s) return last_error();
  const std::shared_ptr<Capture> capture = s->capture;
  if (!capture)
    return fail(cudaErrorIllegalState,
                "cudaStreamEndCapture: " + name_of(*s) + " is not capturing");
  if (capture->origin != s)
    return invalidate_capture(*capture, cudaErrorStreamCaptureUnmatched,
                              "cudaStreamEndCapture on " + name_of(*s) + ": the capture began on " +
                                  name_of(*capture->origin));
  if (capture->mode != cudaStreamCaptureModeRelaxed &&
      capture->thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread,
                "cudaStreamEndCapture: the capture on " + name_of(*s) +
                    " began on another host thread (only a relaxed capture may end elsewhere)");
  *graph = nullptr;
  end(capture);
  if (!capture->invalidated.empty())
    return fail(cudaErrorStreamCaptureInvalidated,
                "cudaStreamEndCapture on " + name_of(*s) + ": the capture was invalidated: " +
                    capture->invalidated);
  for (const auto& [fork, state] : capture->forks)
    if (!state.joined)
      return fail(cudaErrorStreamCaptureUnjoined,
                  "cudaStreamEndCapture on " + name_of(*s) + ": " + name_of(*fork) +
                      " was forked into the capture and its last work was never joined back "
                      "(an event recorded on it after that work, waited on by " + name_of(*s) +
                      ")");
  auto captured = std::make_shared<CapturedGraph>();
  captured->gpu = s->gpu;
  captured->operations = std::move(capture->operations);
  captured->branches = static_cast<uint32_t>(capture->forks.size()) + 1;
  captured->branch_operations.assign(captured->branches, 0);
  captured->branch_operations[0] = capture->origin_branch.operations;
  for (const auto& [stream, fork] : capture->forks)
    captured->branch_operations[fork.branch.index] = fork.branch.operations;
  auto* handle = new CUgraph_st{std::move(captured)};
  e.live_graphs.insert(handle);
  *graph = handle;
  return ok();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  count_call("cudaStreamIsCapturing");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (status == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamIsCapturing: status is null");
  if (stream == nullptr || stream == cudaStreamLegacy) {
    // Asked of the legacy stream while a blocking stream of its GPU captures: CUDA answers
    // cudaErrorStreamCaptureImplicit and "the blocking stream capture is not invalidated" (any
    // other use of the legacy stream would invalidate it: legacy_stream_refused, so not
    // through stream_of). The legacy stream itself never captures.
    Gpu* gpu = current_gpu("cudaStreamIsCapturing");
    if (gpu == nullptr) return last_error();
    for (const auto& weak : gpu->streams)
      if (auto other = weak.lock(); other && other->blocking && !other->legacy && other->capture)
        return fail(cudaErrorStreamCaptureImplicit,
                    "cudaStreamIsCapturing on the legacy stream of " + name_of(*gpu) +
                        " while its blocking " + name_of(*other) + " captures");
    *status = cudaStreamCaptureStatusNone;
    return ok();
  }
  auto s = live_stream(stream, "cudaStreamIsCapturing");
  if (!s) return last_error();
  *status = !s->capture                         ? cudaStreamCaptureStatusNone
            : s->capture->invalidated.empty() ? cudaStreamCaptureStatusActive
                                              : cudaStreamCaptureStatusInvalidated;
  return ok();
}

}  // extern "C"

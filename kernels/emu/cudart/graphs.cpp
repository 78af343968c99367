// Emulated stream capture and CUDA graphs.
//
// While a stream captures (cudaStreamBeginCapture), what it is given — kernel launches, async
// copies and memsets, emulated cuBLAS/cuDNN calls — is recorded, not run: enqueue (streams.cpp)
// hands each task here, and record_access (hb.cpp) the accesses of the task it follows. A
// stream that waits on an event recorded in the capture joins it (a fork); the capture's origin
// waiting on an event recorded on such a stream after its last operation joins it back.
// cudaStreamEndCapture gives the operations, in the order the host issued them, as a graph;
// cudaGraphLaunch enqueues them, in that order, on the launch stream, each with its accesses
// checked by the happens-before check there. A kernel's task holds its arguments by value
// (emulated_gpu.h's launch_native), so a replay runs the arguments as captured, as a GPU does.
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
//     cudaDeviceSynchronize, synchronous cudaMemcpy) are refused while a capture is in
//     progress in cudaStreamCaptureModeGlobal (from any thread) or ThreadLocal (its thread);
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
//
// A replay runs the graph's operations in capture order on one stream: branches the graph
// leaves unordered run one after the other. That is an order a GPU may choose, so the bits are
// the GPU's; what it cannot show is a race between two unordered branches of one graph (the
// happens-before check orders them by the replay's stream).
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

// One operation of a capture: its task, and the accesses the happens-before check checks at
// each replay.
struct CapturedAccess {
  const void* pointer;
  bool write;
  std::string what;
};
struct CapturedOperation {
  Task task;
  std::vector<CapturedAccess> accesses;
};

struct Capture {
  std::shared_ptr<StreamState> origin;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;  // the thread that began it
  std::vector<CapturedOperation> operations;
  std::string invalidated;  // why the capture was invalidated; "" while it holds
  // The streams forked into the capture (not the origin): how many operations each has
  // captured, and whether the origin has waited for all of them since.
  struct Fork {
    uint64_t operations = 0;
    bool joined = false;
  };
  std::map<StreamState*, Fork> forks;
  uint64_t origin_operations = 0;
};

// The graphs are immutable once captured: an instantiation shares the operations.
struct CapturedGraph {
  Gpu* gpu = nullptr;
  std::vector<CapturedOperation> operations;
};

}  // namespace brigade::emu::gpu

struct CUgraph_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
};
struct CUgraphExec_st {
  std::shared_ptr<const brigade::emu::gpu::CapturedGraph> graph;
  // Its last launch (stream, position, clock): the next one is ordered after it, on any stream.
  std::shared_ptr<brigade::emu::gpu::Record> last_launch;
};

namespace brigade::emu::gpu {

namespace {

std::string name_of(const StreamState& s) { return *s.name; }

// Invalidates `capture` (the first reason stays) and fails the call with `code`.
cudaError_t invalidate(Capture& capture, cudaError_t code, const std::string& why) {
  if (capture.invalidated.empty()) capture.invalidated = why;
  return fail(code, why + "; the capture begun on " + name_of(*capture.origin) +
                        " is invalidated (cudaStreamEndCapture returns "
                        "cudaErrorStreamCaptureInvalidated)");
}

void count_operation(Capture& capture, StreamState& stream) {
  if (&stream == capture.origin.get()) {
    ++capture.origin_operations;
    return;
  }
  Capture::Fork& fork = capture.forks[&stream];
  ++fork.operations;
  fork.joined = false;
}

uint64_t operations_of(const Capture& capture, const StreamState& stream) {
  if (&stream == capture.origin.get()) return capture.origin_operations;
  const auto it = capture.forks.find(const_cast<StreamState*>(&stream));
  return it == capture.forks.end() ? 0 : it->second.operations;
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

void capture_task(StreamState& stream, Task task) {
  Capture& capture = *stream.capture;
  count_operation(capture, stream);
  capture.operations.push_back({std::move(task), {}});
}

void capture_access(StreamState& stream, const void* pointer, bool write, const std::string& what) {
  Capture& capture = *stream.capture;
  if (capture.operations.empty()) return;  // an access with no task: nothing to replay
  capture.operations.back().accesses.push_back({pointer, write, what});
}

std::string invalidated_capture(const StreamState& stream) {
  return stream.capture ? stream.capture->invalidated : std::string();
}

cudaError_t capturing_stream_refused(StreamState& stream, const char* call) {
  if (!stream.capture) return cudaSuccess;
  return invalidate(*stream.capture, cudaErrorStreamCaptureUnsupported,
                    std::string(call) + " on " + name_of(stream) +
                        ", which is capturing (a capturing stream may not be synchronised or "
                        "queried)");
}

cudaError_t unsafe_call_refused(const char* call) {
  cudaError_t result = cudaSuccess;
  for (const auto& capture : Emulation::get().captures) {  // each one it applies to
    const bool applies = capture->mode == cudaStreamCaptureModeGlobal ||
                         (capture->mode == cudaStreamCaptureModeThreadLocal &&
                          capture->thread == std::this_thread::get_id());
    if (applies)
      result = invalidate(*capture, cudaErrorStreamCaptureUnsupported,
                          std::string(call) + " while " + name_of(*capture->origin) +
                              " captures in " +
                              (capture->mode == cudaStreamCaptureModeGlobal
                                   ? "cudaStreamCaptureModeGlobal"
                                   : "cudaStreamCaptureModeThreadLocal") +
                              " (a call that may synchronise implicitly is not permitted)");
  }
  return result;
}

cudaError_t legacy_stream_refused(Gpu& gpu, const char* call) {
  for (const auto& weak : gpu.streams)
    if (auto s = weak.lock(); s && s->blocking && !s->legacy && s->capture)
      return invalidate(*s->capture, cudaErrorStreamCaptureImplicit,
                        std::string(call) + " on the legacy stream of " + name_of(gpu) +
                            " while its blocking " + name_of(*s) +
                            " captures (the legacy stream would depend on the capture)");
  return cudaSuccess;
}

std::shared_ptr<Record> capture_record(const std::shared_ptr<StreamState>& stream) {
  auto record = std::make_shared<Record>();
  record->stream = stream;
  record->capture = stream->capture;
  record->captured_ops = operations_of(*stream->capture, *stream);
  return record;
}

cudaError_t captured_event_refused(const Record& record, const char* call) {
  if (!record.capture) return cudaSuccess;
  if (!record.capture->invalidated.empty() ||
      Emulation::get().captures.count(record.capture) == 0)
    return fail(cudaErrorCapturedEvent,
                std::string(call) + ": the event was last recorded in a capture (on " +
                    name_of(*record.stream) + "); it stands for no work a GPU runs");
  return invalidate(*record.capture, cudaErrorCapturedEvent,
                    std::string(call) + ": the event was last recorded in the capture on " +
                        name_of(*record.stream) + " (a captured event may not be queried)");
}

cudaError_t capture_wait(StreamState& waiter, const Record& record, bool* handled) {
  *handled = false;
  const std::shared_ptr<Capture>& theirs = record.capture;
  if (!theirs) {
    if (!waiter.capture) return cudaSuccess;
    return invalidate(*waiter.capture, cudaErrorStreamCaptureIsolation,
                      "cudaStreamWaitEvent: " + name_of(waiter) +
                          " captures and the event was recorded outside the capture (only "
                          "the stream's own order may cross the capture's boundary)");
  }
  *handled = true;
  if (Emulation::get().captures.count(theirs) == 0)
    return fail(cudaErrorCapturedEvent,
                "cudaStreamWaitEvent: the event was recorded in a capture that has ended");
  if (waiter.capture && waiter.capture != theirs)
    return invalidate(*waiter.capture, cudaErrorStreamCaptureMerge,
                      "cudaStreamWaitEvent: " + name_of(waiter) +
                          " and the event belong to two different captures");
  if (!waiter.capture) {  // a fork: the waiter joins the capture
    if (waiter.gpu != theirs->origin->gpu)
      return invalidate(*theirs, cudaErrorNotSupported,
                        "cudaStreamWaitEvent: the emulation captures one device's streams, and " +
                            name_of(waiter) + " is not on " + name_of(*theirs->origin->gpu));
    if (waiter.legacy) return legacy_stream_refused(*waiter.gpu, "cudaStreamWaitEvent");
    waiter.capture = theirs;
    theirs->forks[&waiter];
    return cudaSuccess;
  }
  // Within the capture: the origin waiting for a fork's last operation joins it back.
  if (&waiter == theirs->origin.get() && record.stream.get() != &waiter) {
    auto it = theirs->forks.find(record.stream.get());
    if (it != theirs->forks.end() && it->second.operations == record.captured_ops)
      it->second.joined = true;
  }
  return cudaSuccess;
}

}  // namespace brigade::emu::gpu

using namespace brigade::emu::gpu;

extern "C" {

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
    return invalidate(*capture, cudaErrorStreamCaptureUnmatched,
                      "cudaStreamEndCapture on " + name_of(*s) +
                          ": the capture began on " + name_of(*capture->origin));
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
  auto s = live_stream(stream, "cudaStreamIsCapturing");
  if (!s) return last_error();
  if (s->legacy)
    for (const auto& weak : s->gpu->streams)
      if (auto other = weak.lock(); other && other->blocking && !other->legacy && other->capture)
        return fail(cudaErrorStreamCaptureImplicit,
                    "cudaStreamIsCapturing on the legacy stream of " + name_of(*s->gpu) +
                        " while its blocking " + name_of(*other) + " captures");
  *status = !s->capture                         ? cudaStreamCaptureStatusNone
            : s->capture->invalidated.empty() ? cudaStreamCaptureStatusActive
                                              : cudaStreamCaptureStatusInvalidated;
  return ok();
}

// cudaGraphInstantiate and cudaGraphInstantiateWithFlags, each counted as itself.
static cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags,
                               const char* call) {
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (exec == nullptr) return fail(cudaErrorInvalidValue, std::string(call) + ": exec is null");
  if (e.live_graphs.count(graph) == 0)
    return fail(cudaErrorInvalidValue,
                std::string(call) + ": not a live graph (destroyed, or never captured)");
  if (flags != 0)
    return fail(cudaErrorInvalidValue,
                std::string(call) + ": flags " + std::to_string(flags) +
                    " (the emulation instantiates with none)");
  auto* handle = new CUgraphExec_st{graph->graph, nullptr};
  e.live_graph_execs.insert(handle);
  *exec = handle;
  return ok();
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  count_call("cudaGraphInstantiate");
  return instantiate(exec, graph, flags, "cudaGraphInstantiate");
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  count_call("cudaGraphInstantiateWithFlags");
  return instantiate(exec, graph, flags, "cudaGraphInstantiateWithFlags");
}

// The graph's operations, in capture order, on `stream`, after the graph's previous launch:
// "Each launch is ordered behind both any previous work in stream and any previous launches of
// graphExec" (cudaGraphLaunch). Memory a captured operation touches must still be live: a graph
// keeps addresses, and freed memory at one is an illegal address, as on a GPU.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  count_call("cudaGraphLaunch");
  ChaosAfterCall chaos;  // BRIGADE_EMU_CHAOS: maybe pauses after the call
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_graph_execs.count(exec) == 0)
    return fail(cudaErrorInvalidValue,
                "cudaGraphLaunch: not a live executable graph (destroyed, or never instantiated)");
  auto s = stream_of(stream, "cudaGraphLaunch");
  if (!s) return last_error();
  if (s->capture)
    return invalidate(*s->capture, cudaErrorNotSupported,
                      "cudaGraphLaunch into " + name_of(*s) +
                          ", which captures (the emulation does not capture a graph launch)");
  const CapturedGraph& graph = *exec->graph;
  if (graph.gpu != s->gpu)
    return fail(cudaErrorInvalidValue, "cudaGraphLaunch: the graph was captured on " +
                                           name_of(*graph.gpu) + " and the stream is " +
                                           name_of(*s));
  count_graph_launch();  // one launch, however many operations it enqueues
  if (const auto& last = exec->last_launch)
    enqueue_wait(*s, last->stream, last->position, last->clock);
  for (const CapturedOperation& op : graph.operations) {
    std::string freed;
    for (const CapturedAccess& a : op.accesses)
      if (a.pointer != nullptr && e.find(a.pointer, 0) == nullptr) {
        std::ostringstream os;
        os << "cudaGraphLaunch on " << name_of(*s) << ": " << a.what << " of the graph touches "
           << a.pointer << ", which is no longer allocated (freed after the capture)";
        freed = os.str();
        break;
      }
    Gpu* g = s->gpu;
    if (!freed.empty()) {
      enqueue(*s, Task{[g, freed] {
                         std::lock_guard l(Emulation::get().mutex);
                         set_fault(*g, cudaErrorIllegalAddress, freed);
                       },
                       op.task.what});
      break;
    }
    enqueue(*s, op.task);
    for (const CapturedAccess& a : op.accesses) record_access(*s, a.pointer, a.write, a.what);
  }
  auto launched = std::make_shared<Record>();
  launched->stream = s;
  launched->position = s->enqueued;
  launched->clock = s->clock;
  exec->last_launch = std::move(launched);
  return ok();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  count_call("cudaGraphExecDestroy");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_graph_execs.erase(exec) == 0)
    return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: not a live executable graph");
  delete exec;  // launches in flight hold their tasks
  return ok();
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  count_call("cudaGraphDestroy");
  Emulation& e = Emulation::get();
  std::lock_guard lock(e.mutex);
  if (e.live_graphs.erase(graph) == 0)
    return fail(cudaErrorInvalidValue, "cudaGraphDestroy: not a live graph");
  delete graph;  // its instantiations share its operations
  return ok();
}

}  // extern "C"

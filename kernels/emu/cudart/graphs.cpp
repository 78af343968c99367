// Emulated CUDA graphs: a graph captured from a stream (capture.cpp) instantiated, launched
// and destroyed. cudaGraphLaunch enqueues the graph's operations, in capture order, on the
// launch stream, each with its accesses checked by the happens-before check there. A kernel's
// task holds its arguments by value (emulated_gpu.h's launch_native), so a replay runs the
// arguments as captured, as a GPU does.
//
// A replay runs the graph's operations in capture order on one stream: branches the graph
// leaves unordered run one after the other. That is an order a GPU may choose, so the bits are
// the GPU's; what it cannot show is a race between two unordered branches of one graph (the
// happens-before check orders them by the replay's stream).
#include <sstream>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/captured_graph.h"
#include "kernels/emu/cudart/gpu.h"

using namespace brigade::emu::gpu;

extern "C" {

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
    return invalidate_capture(
        *s->capture, cudaErrorNotSupported,
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

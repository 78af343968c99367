// Emulated CUDA graphs: a graph captured from a stream (capture.cpp) instantiated, launched
// and destroyed. cudaGraphLaunch enqueues the graph's operations, in capture order, on the
// launch stream. A kernel's task holds its arguments by value (emulated_gpu.h's launch_native),
// so a replay runs the arguments as captured, as a GPU does.
//
// A replay RUNS the operations one after the other, an order a GPU may choose, so the bits are
// a GPU's; but the happens-before check sees the graph as the capture made it: each branch
// (each stream of the capture) is ordered as a stream of its own, after the launch stream's
// earlier work and after what the capture's events ordered it after, so two branches nothing
// orders race as two streams would, and the report says they are unordered branches of one
// graph. Work after the launch on its stream is ordered after every branch.
//
// Each launch also checks again what a launch checked at the capture, against the memory as
// it is now: that every operation's memory is still allocated, and that each kernel's declared
// extents (BRIGADE_EXTENT) still fit their allocations (freed and allocated again smaller, or
// lent to a smaller tensor by the engine's allocator since). And, stricter than a GPU, that
// the engine's allocator has not taken back a block the capture touched (Allocation::lendings):
// a GPU would let the replay write into the block's next tensor, in the cache or lent again at
// any size, and nothing would say so. A check that fails faults the GPU (cudaErrorIllegalAddress,
// sticky) where the operation would have run, as the GPU's memory unit does for memory no
// longer allocated; nothing after it runs.
#include <sstream>
#include <string>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/captured_graph.h"
#include "kernels/emu/cudart/gpu.h"

using namespace brigade::emu::gpu;

namespace {

// Why `op` may not run now, or "": memory it touches freed since the capture, a kernel's
// declared extent that no longer fits (the launch-time check, made again), or a block the
// engine's allocator took back since.
std::string replay_refusal(const StreamState& stream, const CapturedOperation& op) {
  const Emulation& e = Emulation::get();
  const std::string launch = "cudaGraphLaunch on " + name_of(stream) + ": ";
  for (const CapturedAccess& a : op.accesses)
    if (a.pointer != nullptr && e.find(a.pointer, 0) == nullptr) {
      std::ostringstream os;
      os << launch << a.what << " of the graph touches " << a.pointer
         << ", which is no longer allocated (freed after the capture)";
      return os.str();
    }
  if (op.recheck) {
    const std::string illegal = op.recheck();
    if (!illegal.empty()) return launch + illegal + " (the memory changed since the capture)";
  }
  // Still allocated and large enough, but perhaps another tensor's now (the header says why
  // this is refused).
  for (const CapturedAccess& a : op.accesses) {
    uintptr_t start = 0;
    const Allocation* now = a.pointer != nullptr ? e.find(a.pointer, 0, &start) : nullptr;
    if (now == nullptr || now->lendings == a.lendings) continue;
    std::ostringstream os;
    os << launch << a.what << " of the graph touches " << a.pointer << " in "
       << memory_name(*now, start)
       << ", which the engine's allocator has taken back since the capture (the block may now "
          "hold another tensor)";
    return os.str();
  }
  return "";
}

// How a race report names a branch of a graph launched on `stream`.
std::vector<std::shared_ptr<const std::string>> branch_names(const StreamState& stream,
                                                             uint32_t branches) {
  std::vector<std::shared_ptr<const std::string>> names;
  for (uint32_t b = 0; b < branches; ++b)
    names.push_back(std::make_shared<const std::string>(
        name_of(stream) + " (replaying a graph: " +
        (b == 0 ? std::string("the branch captured on the capture's origin stream")
                : "the branch captured on the stream forked " + std::to_string(b) +
                      (b == 1 ? "st" : b == 2 ? "nd" : b == 3 ? "rd" : "th") +
                      " into the capture") +
        ")"));
  return names;
}

}  // namespace

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
  auto* handle = new CUgraphExec_st{graph->graph, nullptr, {}, {}};
  for (uint32_t b = 0; b < graph->graph->branches; ++b) {  // each branch a stream, to the check
    handle->branch_ids.push_back(e.next_stream_id++);
    handle->branch_replayed.push_back(0);
  }
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
// graphExec" (cudaGraphLaunch). Memory a captured operation touches must still be live and
// large enough: a graph keeps addresses, and what is no longer there is an illegal address.
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
  // The graph's start, where every branch begins: after the stream's earlier work.
  enqueue(*s, Task{[] {}, "cudaGraphLaunch"});
  const VectorClock start = s->clock;
  const uint64_t launch = ++e.graph_launches;
  const auto names = branch_names(*s, graph.branches);
  const std::vector<uint32_t>& ids = exec->branch_ids;
  std::vector<uint64_t>& replayed = exec->branch_replayed;  // before this launch
  VectorClock now = start;  // each operation's: the start, and what of each branch precedes it
  for (const CapturedOperation& op : graph.operations) {
    if (std::string refused = replay_refusal(*s, op); !refused.empty()) {
      Gpu* g = s->gpu;
      enqueue(*s, Task{[g, refused = std::move(refused)] {
                         std::lock_guard l(Emulation::get().mutex);
                         set_fault(*g, cudaErrorIllegalAddress, refused);
                       },
                       op.task.what});
      break;
    }
    enqueue(*s, op.task);
    // What the capture ordered before the operation, each branch a stream of its own (the
    // start holds at most the branches' earlier launches, all before replayed[b] + 1).
    for (uint32_t b = 0; b < graph.branches; ++b) {
      const uint64_t n = op.after.at(b);
      now.set(ids[b], n > 0 ? replayed[b] + n : start.at(ids[b]));
    }
    const uint64_t position = replayed[op.branch] + op.after.at(op.branch);
    for (const CapturedAccess& a : op.accesses)
      check_access(*s->gpu, now, Access{ids[op.branch], position, a.what, names[op.branch], launch},
                   a.pointer, a.bytes, a.write);
  }
  // The launch is done when every branch is: later work on the stream is ordered after all.
  for (uint32_t b = 0; b < graph.branches; ++b) {
    replayed[b] += graph.branch_operations[b];
    s->clock.advance(ids[b], replayed[b]);
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

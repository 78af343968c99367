// The calling thread's AllocationTrace::Recording and PoolScope (graph_memory.h), if any: set
// by their constructors and destructors (graph_memory.cpp), read by Allocator::allocate and
// release; and the CUDA graph captures under way on each GPU, on any thread, which hold back
// the allocator's returns of memory to CUDA (allocator.cpp). Internal to the engine.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

namespace brigade {
class AllocationTrace;
class PoolScope;

namespace detail {
AllocationTrace*& recorded_trace_of_this_thread();  // the trace a Recording records into
PoolScope*& pool_scope_of_this_thread();

// Around each capture (CudaGraph::capture, on the thread that captures): a capture under way on
// GPU `gpu`. While one is, memory goes back to CUDA on no thread: cudaFree waits for the whole
// of its GPU, and cudaFreeHost for every GPU, and CUDA forbids a wait for the whole of a device
// while a stream of it captures, whatever the thread and its capture mode (a capture on one
// GPU shared by several stages would be invalidated by another stage's free).
void capture_begins(int gpu);
void capture_ends(int gpu);
// Runs `give_back` (a cudaFree of `gpu`'s memory; -1: a cudaFreeHost, which waits for every
// GPU) unless a capture is under way there, no capture beginning meanwhile; whether it ran.
bool give_back_unless_capturing(int gpu, const std::function<void()>& give_back);
// The same, but first waiting for the captures under way there to end, up to `deadline` (none:
// however long they take), except on a thread that is itself capturing: its own capture ends
// only after this returns.
bool give_back_after_captures(int gpu,
                              std::optional<std::chrono::steady_clock::time_point> deadline,
                              const std::function<void()>& give_back);
}  // namespace detail
}  // namespace brigade

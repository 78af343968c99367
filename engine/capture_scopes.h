// The calling thread's AllocationTrace::Recording and PoolScope (graph_memory.h), if any: set
// by their constructors and destructors (graph_memory.cpp), read by Allocator::allocate and
// release. Internal to the engine.
#pragma once

namespace brigade {
class AllocationTrace;
class PoolScope;

namespace detail {
AllocationTrace*& recorded_trace_of_this_thread();  // the trace a Recording records into
PoolScope*& pool_scope_of_this_thread();
}  // namespace detail
}  // namespace brigade

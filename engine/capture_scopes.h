// The calling thread's AllocationLog and CaptureReserve (allocator.h), if any: set by their
// constructors and destructors (graph_memory.cpp), read by Allocator::allocate and release.
// Internal to the engine.
#pragma once

namespace brigade {
class AllocationLog;
class CaptureReserve;

namespace detail {
AllocationLog*& allocation_log_of_this_thread();
CaptureReserve*& capture_reserve_of_this_thread();
}  // namespace detail
}  // namespace brigade

// allocation_waits: whether an allocation started on another thread is waiting for queued work
// (the allocator's count of such waits has moved) or has already ended, decided without a
// timing assumption.
//
//   auto pending = std::async(std::launch::async, [&] { return alloc.allocate(n, s); });
//   CHECK(allocation_waits(alloc, waits_before, pending));   // true: it is waiting
//   gate.open();                                            // the work it waits for runs
//   auto block = pending.get();
//
// The allocator counts a wait (MemoryStats::waits_for_pending) before it starts waiting: once
// the count has moved, the call can end only after the held work has run, or by throwing,
// which get() then reports. False means the call ended (it returned or threw) without waiting.
#pragma once

#include <chrono>
#include <future>
#include <thread>

#include "engine/allocator.h"

namespace brigade::testing {

template <typename T>
bool allocation_waits(const Allocator& alloc, uint64_t waits_before, const std::future<T>& call) {
  for (;;) {
    if (call.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return false;
    if (alloc.stats().waits_for_pending > waits_before) return true;
    std::this_thread::yield();
  }
}

}  // namespace brigade::testing

// The memory of CUDA graphs (graph_memory.h): AllocationTrace, plan_graph_memory, GraphPool,
// PoolScope. The allocator reaches the trace and the pool through the calling thread's scopes
// (capture_scopes.h).
#include "engine/graph_memory.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "engine/capture_scopes.h"
#include "engine/error.h"

namespace brigade {

namespace detail {
AllocationTrace*& recorded_trace_of_this_thread() {
  thread_local AllocationTrace* trace = nullptr;
  return trace;
}
PoolScope*& pool_scope_of_this_thread() {
  thread_local PoolScope* scope = nullptr;
  return scope;
}
}  // namespace detail

// ---- The plan -------------------------------------------------------------------------------

uint64_t GraphMemoryPlan::bytes() const {
  return std::accumulate(slot_bytes.begin(), slot_bytes.end(), uint64_t{0});
}

GraphMemoryPlan plan_graph_memory(const std::vector<TracedRequest>& requests) {
  // A request lives over [asked_at, freed_at): two share a slot when those do not overlap.
  struct Life {
    uint64_t from, to;
  };
  std::vector<uint32_t> by_size(requests.size());  // requests, the largest first
  std::iota(by_size.begin(), by_size.end(), 0u);
  std::stable_sort(by_size.begin(), by_size.end(), [&](uint32_t a, uint32_t b) {
    return requests[a].bytes > requests[b].bytes;
  });
  GraphMemoryPlan plan;
  for (const TracedRequest& r : requests) plan.request_bytes.push_back(r.bytes);
  plan.request_slot.resize(requests.size());
  std::vector<std::vector<Life>> lives;  // [slot] the lives it serves
  for (const uint32_t r : by_size) {
    const Life life{requests[r].asked_at, requests[r].freed_at};
    auto free_over = [&](const std::vector<Life>& taken) {
      return std::none_of(taken.begin(), taken.end(), [&](const Life& t) {
        return t.from < life.to && life.from < t.to;
      });
    };
    // Every slot so far is at least as large (largest first): the smallest that is free.
    uint32_t chosen = static_cast<uint32_t>(lives.size());
    for (uint32_t s = 0; s < lives.size(); ++s)
      if ((chosen == lives.size() || plan.slot_bytes[s] < plan.slot_bytes[chosen]) &&
          free_over(lives[s]))
        chosen = s;
    if (chosen == lives.size()) {
      lives.emplace_back();
      plan.slot_bytes.push_back(requests[r].bytes);
    }
    lives[chosen].push_back(life);
    plan.request_slot[r] = chosen;
  }
  return plan;
}

// ---- The trace ------------------------------------------------------------------------------

std::shared_ptr<AllocationTrace> AllocationTrace::create(const Stream& stream) {
  return std::shared_ptr<AllocationTrace>(new AllocationTrace(stream));
}

AllocationTrace::AllocationTrace(const Stream& stream)
    : stream_id_(stream.id()), thread_(std::this_thread::get_id()) {}

AllocationTrace::Recording::Recording(AllocationTrace& trace) {
  BRIGADE_CHECK(trace.thread_ == std::this_thread::get_id(),
                "an allocation trace recorded on a thread other than its own");
  BRIGADE_CHECK(detail::recorded_trace_of_this_thread() == nullptr &&
                    detail::pool_scope_of_this_thread() == nullptr,
                "an allocation trace recorded inside another recording or pool scope");
  detail::recorded_trace_of_this_thread() = &trace;
}

AllocationTrace::Recording::~Recording() { detail::recorded_trace_of_this_thread() = nullptr; }

uint64_t AllocationTrace::allocated(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.push_back({bytes, events_++, TracedRequest::kNever});
  return requests_.size() - 1;
}

void AllocationTrace::freed(uint64_t request, bool used_elsewhere) {
  // Another thread's free comes when that thread gets to it, not at a point of this thread's
  // sequence; a block another stream used is not reused (graph_memory.h): both never freed.
  if (used_elsewhere || std::this_thread::get_id() != thread_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  TracedRequest& r = requests_[request];
  if (open_ && r.freed_at == TracedRequest::kNever) r.freed_at = events_++;
}

void AllocationTrace::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = false;
}

std::vector<TracedRequest> AllocationTrace::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

// ---- The pool -------------------------------------------------------------------------------

// The slots, and which are free. Shared with the deleters of the handles it gives out, which
// may run after the pool is gone (a tensor that outlives its graph).
struct GraphPool::State {
  std::mutex mutex;
  bool open = true;
  GraphMemoryPlan plan;
  std::vector<std::shared_ptr<Block>> slots;  // [slot]
  std::vector<bool> free;                     // [slot] not held by a tensor
  uint64_t next_request = 0;                  // the plan's request the next serve() is
};

GraphPool::GraphPool(Stream stream, const GraphMemoryPlan& plan)
    : stream_(std::move(stream)), state_(std::make_shared<State>()) {
  Allocator& allocator = Allocator::of(stream_.device());
  state_->plan = plan;
  for (const uint64_t bytes : plan.slot_bytes)
    state_->slots.push_back(allocator.allocate(bytes, stream_));
  state_->free.assign(plan.slot_bytes.size(), true);
}

void GraphPool::close() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->open = false;
}

uint64_t GraphPool::bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  uint64_t total = 0;
  for (const std::shared_ptr<Block>& slot : state_->slots) total += slot->size();
  return total;
}

std::shared_ptr<Block> GraphPool::slot_of(const Tensor& t) const {
  if (!t.defined()) return nullptr;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const std::shared_ptr<Block>& slot : state_->slots)
    if (slot == t.storage()) return slot;  // the same block: a lease is a handle of it
  return nullptr;
}

bool GraphPool::holds(const Tensor& t) const { return slot_of(t) != nullptr; }

Tensor GraphPool::unleased(const Tensor& t) const {
  if (std::shared_ptr<Block> slot = slot_of(t)) return t.through(std::move(slot));
  throw Error(stream_.str() + ": " + (t.defined() ? t.str() : "an undefined tensor") +
              " is not in one of its graph pool's slots");
}

std::shared_ptr<Block> GraphPool::serve(uint64_t bytes) {
  State& state = *state_;
  std::unique_lock<std::mutex> lock(state.mutex);
  const GraphMemoryPlan& plan = state.plan;
  const uint64_t request = state.next_request++;
  size_t slot = plan.slot_bytes.size();
  if (request < plan.request_slot.size() && plan.request_bytes[request] == bytes &&
      state.free[plan.request_slot[request]])
    slot = plan.request_slot[request];  // as planned
  else  // not as the eager run went: the smallest free slot that holds it, if any
    for (size_t s = 0; s < plan.slot_bytes.size(); ++s)
      if (state.free[s] && plan.slot_bytes[s] >= bytes &&
          (slot == plan.slot_bytes.size() || plan.slot_bytes[s] < plan.slot_bytes[slot]))
        slot = s;
  if (slot == plan.slot_bytes.size()) {
    lock.unlock();
    throw Error(stream_.str() + ": a captured CUDA graph asked for " + format_bytes(bytes) +
                " more than the eager run it was planned by held at once (request " +
                std::to_string(request) + " of " + std::to_string(plan.request_slot.size()) +
                ")");
  }
  state.free[slot] = false;
  // The handle a tensor holds: its deleter gives the slot back to the pool (free for the rest
  // of the sequence while the pool is open), never to the allocator; the pool keeps the memory.
  const std::weak_ptr<State> weak = state_;
  Block* const block = state.slots[slot].get();
  return std::shared_ptr<Block>(block, [weak, slot](Block* b) {
    const std::shared_ptr<State> owner = weak.lock();
    if (!owner || b->used_elsewhere()) return;  // another stream's use: its graph's alone
    std::lock_guard<std::mutex> guard(owner->mutex);
    if (owner->open) owner->free[slot] = true;
  });
}

PoolScope::PoolScope(GraphPool& pool) : pool_(pool) {
  BRIGADE_CHECK(detail::recorded_trace_of_this_thread() == nullptr &&
                    detail::pool_scope_of_this_thread() == nullptr,
                "a graph pool's scope inside another scope or allocation recording");
  detail::pool_scope_of_this_thread() = this;
}

PoolScope::~PoolScope() {
  detail::pool_scope_of_this_thread() = nullptr;
  for (const auto& [allocator, block] : held_back_) allocator->release(block);
}

}  // namespace brigade

// The memory of CUDA graphs (graph_memory.h): AllocationTrace, plan_graph_memory, GraphPool,
// PoolScope. The allocator reaches the trace and the pool through the calling thread's scopes
// (capture_scopes.h).
#include "engine/graph_memory.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
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

uint64_t GraphMemoryPlan::range_bytes(uint64_t request_bytes) {
  return std::max<uint64_t>(1, (request_bytes + kAlignment - 1) / kAlignment) * kAlignment;
}

GraphMemoryPlan plan_graph_memory(const std::vector<TracedRequest>& requests) {
  // A request lives over [asked_at, freed_at): two may share bytes when those do not overlap.
  auto overlap = [&](uint32_t a, uint32_t b) {
    return requests[a].asked_at < requests[b].freed_at &&
           requests[b].asked_at < requests[a].freed_at;
  };
  std::vector<uint32_t> by_size(requests.size());  // requests, the largest first
  std::iota(by_size.begin(), by_size.end(), 0u);
  std::stable_sort(by_size.begin(), by_size.end(), [&](uint32_t a, uint32_t b) {
    return requests[a].bytes > requests[b].bytes;
  });
  GraphMemoryPlan plan;
  for (const TracedRequest& r : requests) plan.request_bytes.push_back(r.bytes);
  plan.request_offset.resize(requests.size());
  std::vector<uint32_t> placed;  // so far, by offset
  for (const uint32_t r : by_size) {
    const uint64_t size = GraphMemoryPlan::range_bytes(requests[r].bytes);
    // The gaps between the ranges placed whose lives overlap r's, in the order of their offsets:
    // the smallest that holds r, else the end of the last.
    uint64_t end = 0;  // of the ranges so far that overlap r in time
    uint64_t best = 0, best_gap = ~uint64_t{0};
    bool found = false;
    for (const uint32_t p : placed) {
      if (!overlap(p, r)) continue;
      const uint64_t at = plan.request_offset[p];
      if (at >= end && at - end >= size && at - end < best_gap) {
        best = end;
        best_gap = at - end;
        found = true;
      }
      end = std::max(end, at + GraphMemoryPlan::range_bytes(requests[p].bytes));
    }
    plan.request_offset[r] = found ? best : end;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.request_offset[r] + size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), plan.request_offset[r],
                                   [&](uint64_t offset, uint32_t p) {
                                     return offset < plan.request_offset[p];
                                   }),
                  r);
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

// The arena, and which of its bytes are held. Shared with the deleters of the handles it gives
// out, which may run after the pool is gone (a tensor that outlives its graph).
struct GraphPool::State {
  std::mutex mutex;
  bool open = true;
  GraphMemoryPlan plan;
  std::shared_ptr<Block> arena;
  std::vector<std::shared_ptr<Block>> ranges;  // the pool's handle of each range it served
  std::map<uint64_t, uint64_t> held;           // offset -> end, of the ranges a tensor holds
  uint64_t next_request = 0;                   // the plan's request the next serve() is

  bool free_over(uint64_t offset, uint64_t end) const {
    auto after = held.lower_bound(end);  // the first range that starts at or after `end`
    return after == held.begin() || std::prev(after)->second <= offset;
  }
  // The smallest gap of the arena that holds `size` bytes (its offset), or none.
  std::optional<uint64_t> smallest_gap(uint64_t size) const {
    std::optional<uint64_t> best;
    uint64_t best_gap = 0, end = 0;
    auto consider = [&](uint64_t next) {
      if (next - end >= size && (!best || next - end < best_gap)) {
        best = end;
        best_gap = next - end;
      }
    };
    for (const auto& [at, to] : held) {
      consider(at);
      end = to;
    }
    if (plan.arena_bytes >= end) consider(plan.arena_bytes);
    return best;
  }
};

GraphPool::GraphPool(Stream stream, const GraphMemoryPlan& plan)
    : stream_(std::move(stream)), state_(std::make_shared<State>()) {
  state_->plan = plan;
  if (plan.arena_bytes > 0)
    state_->arena = Allocator::of(stream_.device()).allocate_exact(plan.arena_bytes, stream_);
}

void GraphPool::close() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->open = false;
}

uint64_t GraphPool::bytes() const { return state_->arena ? state_->arena->size() : 0; }

std::shared_ptr<Block> GraphPool::range_of(const Tensor& t) const {
  if (!t.defined()) return nullptr;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const std::shared_ptr<Block>& range : state_->ranges)
    if (range == t.storage()) return range;  // the same block: a lease is a handle of it
  return nullptr;
}

bool GraphPool::holds(const Tensor& t) const { return range_of(t) != nullptr; }

Tensor GraphPool::unleased(const Tensor& t) const {
  if (std::shared_ptr<Block> range = range_of(t)) return t.through(std::move(range));
  throw Error(stream_.str() + ": " + (t.defined() ? t.str() : "an undefined tensor") +
              " is not one of its graph pool's tensors");
}

std::shared_ptr<Block> GraphPool::serve(uint64_t bytes) {
  State& state = *state_;
  std::unique_lock<std::mutex> lock(state.mutex);
  const GraphMemoryPlan& plan = state.plan;
  const uint64_t request = state.next_request++;
  const uint64_t size = GraphMemoryPlan::range_bytes(bytes);
  std::optional<uint64_t> offset;
  if (request < plan.request_offset.size() && plan.request_bytes[request] == bytes &&
      state.free_over(plan.request_offset[request], plan.request_offset[request] + size))
    offset = plan.request_offset[request];  // as planned
  else  // not as the eager run went: the smallest gap that holds it, if any
    offset = state.smallest_gap(size);
  if (!offset) {
    lock.unlock();
    throw Error(stream_.str() + ": a captured CUDA graph asked for " + format_bytes(bytes) +
                " more than the eager run it was planned by held at once (request " +
                std::to_string(request) + " of " + std::to_string(plan.request_offset.size()) +
                ")");
  }
  state.held.emplace(*offset, *offset + size);
  // The pool's handle of the range, which keeps the arena alive: a tensor may outlive the pool.
  auto* const data = static_cast<unsigned char*>(state.arena->data()) + *offset;
  // A user on another stream waits, as for any block, for the arena's previous life's work.
  // Streams that used the range used the arena: when the range goes, the arena keeps them, so
  // that its own return to the allocator waits for their work too.
  std::shared_ptr<Block> range(new Block(data, size, stream_, state.arena->owner_before_),
                               [arena = state.arena](Block* b) {
                                 arena->adopt_users(*b);
                                 delete b;
                               });
  state.ranges.push_back(range);
  // The handle a tensor holds: its deleter gives the bytes back to the pool (free for the rest
  // of the sequence while the pool is open), never to the allocator.
  const std::weak_ptr<State> weak = state_;
  Block* const block = range.get();
  return std::shared_ptr<Block>(block, [weak, range, at = *offset](Block* b) {
    const std::shared_ptr<State> owner = weak.lock();
    if (!owner || b->used_elsewhere()) return;  // another stream's use: its graph's alone
    std::lock_guard<std::mutex> guard(owner->mutex);
    if (owner->open) owner->held.erase(at);
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

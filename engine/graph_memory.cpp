// The memory of CUDA graphs (allocator.h, its end): AllocationLog, GraphPool, CaptureReserve.
// The allocator serves a capture, and logs a sizing run, through the scopes of the calling
// thread (capture_scopes.h).
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "engine/allocator.h"
#include "engine/capture_scopes.h"
#include "engine/error.h"

namespace brigade {

namespace detail {
AllocationLog*& allocation_log_of_this_thread() {
  thread_local AllocationLog* log = nullptr;
  return log;
}
CaptureReserve*& capture_reserve_of_this_thread() {
  thread_local CaptureReserve* reserve = nullptr;
  return reserve;
}
}  // namespace detail

AllocationLog::AllocationLog(const Stream& stream) : stream_id_(stream.id()) {
  BRIGADE_CHECK(detail::allocation_log_of_this_thread() == nullptr &&
                    detail::capture_reserve_of_this_thread() == nullptr,
                "an allocation log inside another log or capture reserve of this thread");
  detail::allocation_log_of_this_thread() = this;
}

AllocationLog::~AllocationLog() { detail::allocation_log_of_this_thread() = nullptr; }

void AllocationLog::allocated(const Block* block, uint64_t bytes) {
  live_[block] = bytes;
  auto& [now, most] = counts_[bytes];
  most = std::max(most, ++now);
}

void AllocationLog::freed(const Block* block) {
  const auto it = live_.find(block);
  if (it == live_.end()) return;  // not one of the logged requests
  --counts_[it->second].first;
  live_.erase(it);
}

std::vector<uint64_t> AllocationLog::requests() const {
  std::vector<uint64_t> blocks;
  for (const auto& [bytes, count] : counts_) blocks.insert(blocks.end(), count.second, bytes);
  return blocks;
}

// A pool's blocks, and which of them are free. Shared with the deleters of the blocks it hands
// out, which may run after the pool is gone (a tensor that outlives its graph).
struct GraphPool::State {
  std::mutex mutex;
  bool open = true;
  std::vector<std::shared_ptr<Block>> owned;                      // every block it was given
  std::vector<std::pair<uint64_t, std::shared_ptr<Block>>> free;  // (bytes asked, block) freed
};

GraphPool::GraphPool(Stream stream) : stream_(std::move(stream)), state_(std::make_shared<State>()) {}

void GraphPool::close() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->open = false;
  state_->free.clear();
}

uint64_t GraphPool::bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  uint64_t total = 0;
  for (const std::shared_ptr<Block>& block : state_->owned) total += block->size();
  return total;
}

std::shared_ptr<Block> GraphPool::adopt(std::shared_ptr<Block> block, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->owned.push_back(block);
  }
  return hand_out(block, bytes);
}

int GraphPool::free_blocks(uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<int>(std::count_if(state_->free.begin(), state_->free.end(),
                                        [&](const auto& f) { return f.first == bytes; }));
}

std::shared_ptr<Block> GraphPool::take(uint64_t bytes) {
  std::shared_ptr<Block> block;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = std::find_if(state_->free.begin(), state_->free.end(),
                           [&](const auto& f) { return f.first == bytes; });
    if (it == state_->free.end()) return nullptr;
    block = std::move(it->second);
    state_->free.erase(it);
  }
  return hand_out(block, bytes);
}

// The handle a tensor holds: its deleter gives the block back to the pool (free for the rest
// of the sequence while the pool is open), never to the allocator; the pool's own handle keeps
// the memory.
std::shared_ptr<Block> GraphPool::hand_out(const std::shared_ptr<Block>& owned, uint64_t bytes) {
  const std::weak_ptr<State> weak = state_;
  return std::shared_ptr<Block>(owned.get(), [weak, owned, bytes](Block* block) {
    const std::shared_ptr<State> state = weak.lock();
    if (!state || block->used_elsewhere()) return;  // another stream's use: its graph's alone
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->open) state->free.emplace_back(bytes, owned);
  });
}

CaptureReserve::CaptureReserve(const std::vector<uint64_t>& requests, GraphPool& pool)
    : pool_(pool) {
  BRIGADE_CHECK(detail::allocation_log_of_this_thread() == nullptr &&
                    detail::capture_reserve_of_this_thread() == nullptr,
                "a capture reserve inside another reserve or allocation log of this thread");
  // The pool's freed blocks serve first (serve()): only the requests they cannot are taken.
  Allocator& allocator = Allocator::of(pool.stream().device());
  std::map<uint64_t, int> in_pool;
  for (uint64_t bytes : requests) {
    auto [it, first] = in_pool.try_emplace(bytes, 0);
    if (first) it->second = pool.free_blocks(bytes);
    if (it->second > 0)
      --it->second;
    else
      reserved_.push_back({bytes, allocator.allocate(bytes, pool.stream())});
  }
  detail::capture_reserve_of_this_thread() = this;  // last: the blocks above are ordinary allocations
}

CaptureReserve::~CaptureReserve() {
  detail::capture_reserve_of_this_thread() = nullptr;
  for (const auto& [allocator, block] : held_back_) allocator->release(block);
}

std::shared_ptr<Block> CaptureReserve::serve(uint64_t bytes) {
  if (std::shared_ptr<Block> freed = pool_.take(bytes)) return freed;
  for (Reserved& r : reserved_)
    if (r.block && r.bytes == bytes) return pool_.adopt(std::exchange(r.block, nullptr), bytes);
  throw Error(pool_.stream().str() + ": a captured CUDA graph asked for " + format_bytes(bytes) +
              " that the eager run it was sized by did not ask for");
}

}  // namespace brigade

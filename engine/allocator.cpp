// The caching allocator (allocator.h): a block from its bin of the cache or from the system,
// given back to the cache with the events that say when its memory is safe again, and the
// cache emptied. What happens when a request does not fit: allocator_out_of_memory.cpp.
#include "engine/allocator.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "engine/capture_scopes.h"
#include "engine/error.h"
#include "engine/graph_memory.h"
#include "engine/stream_impl.h"

namespace brigade {

namespace detail {
// allocator_cuda.cpp (CUDA builds): cudaMalloc (nullptr when out of memory), cudaFree, and
// the device's total memory.
void* cuda_raw_allocate(const Device& device, uint64_t size);
void cuda_raw_free(const Device& device, void* data);
// Emulated GPUs only (a real GPU does nothing): fills a block returning to the cache with NaN
// on its owner stream, after the users' work.
void cuda_poison_returned(void* data, uint64_t size, const Stream& owner,
                          const std::vector<Event>& users_done);
// Emulated GPUs only: how many bytes of the block the tensor asked for; 0: back in the cache.
void cuda_lend(void* data, uint64_t bytes);
void* cuda_pinned_allocate(uint64_t size);  // null when out of memory
void cuda_pinned_free(void* data);
uint64_t cuda_total_memory(const Device& device);
}  // namespace detail

namespace {
constexpr std::align_val_t cpu_alignment{64};  // a cache line; enough for any SIMD load

// False too when an event cannot be asked: a GPU that faulted keeps the error (a sticky
// error), so the work of its streams that used a block is never known to be done, and the
// block is never handed out again — a healthy device's allocation (a block another GPU's
// stream copied from, then faulted) must not fail with that GPU's error.
bool all_done(const std::vector<Event>& events) {
  return std::all_of(events.begin(), events.end(), [](const Event& e) {
    try {
      return e.query();
    } catch (const std::exception&) {
      return false;
    }
  });
}

// Frees that met a stream capturing a CUDA graph (Allocator::release), of every allocator:
// made again by release_deferred(). Never destroyed: blocks may be freed in static destruction.
std::mutex& deferred_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<std::pair<Allocator*, Block*>>& deferred_frees() {
  static auto* frees = new std::vector<std::pair<Allocator*, Block*>>;
  return *frees;
}

// The captures under way on each GPU (capture_scopes.h), of every thread, and of this one.
// Never destroyed, as above.
struct CapturesUnderWay {
  std::mutex mutex;
  std::condition_variable ended;
  std::map<int, int> on_gpu;  // GPU -> captures under way on it (no entry: none)
  bool blocks(int gpu) const { return gpu < 0 ? !on_gpu.empty() : on_gpu.count(gpu) != 0; }
};
CapturesUnderWay& captures_under_way() {
  static auto* captures = new CapturesUnderWay;
  return *captures;
}
thread_local int captures_of_this_thread = 0;

// The GPU whose captures hold back a return of an allocator's memory to CUDA: its own; every
// GPU's (-1) for page-locked memory; none for a CPU device's.
std::optional<int> gpu_holding_returns(const Device& device, bool pinned) {
  if (pinned) return -1;
  if (device.is_cuda()) return device.index;
  return std::nullopt;
}

// True the first time an allocator (of `device`, pinned or not) keeps a freed block out of its
// cache: release() says so once, not once per block.
bool first_not_reused(const Device& device, bool pinned) {
  static auto* mutex = new std::mutex;                         // never freed: blocks may be
  static auto* said = new std::set<std::pair<Device, bool>>;  // freed in static destruction
  std::lock_guard<std::mutex> lock(*mutex);
  return said->insert({device, pinned}).second;
}
}  // namespace

namespace detail {

void capture_begins(int gpu) {
  CapturesUnderWay& c = captures_under_way();
  std::lock_guard<std::mutex> lock(c.mutex);  // after any give-back under way: it ran first
  ++c.on_gpu[gpu];
  ++captures_of_this_thread;
}

void capture_ends(int gpu) {
  CapturesUnderWay& c = captures_under_way();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (--c.on_gpu[gpu] == 0) c.on_gpu.erase(gpu);
    --captures_of_this_thread;
  }
  c.ended.notify_all();
}

bool give_back_unless_capturing(int gpu, const std::function<void()>& give_back) {
  CapturesUnderWay& c = captures_under_way();
  std::lock_guard<std::mutex> lock(c.mutex);  // held: no capture begins while it runs
  if (c.blocks(gpu)) return false;
  give_back();
  return true;
}

bool give_back_after_captures(int gpu,
                              std::optional<std::chrono::steady_clock::time_point> deadline,
                              const std::function<void()>& give_back) {
  CapturesUnderWay& c = captures_under_way();
  std::unique_lock<std::mutex> lock(c.mutex);
  // Other threads' captures only enqueue work, never wait for this thread: they end.
  const auto none = [&] { return !c.blocks(gpu); };
  if (captures_of_this_thread == 0) {
    if (deadline)
      c.ended.wait_until(lock, *deadline, none);
    else
      c.ended.wait(lock, none);
  }
  if (!none()) return false;
  give_back();
  return true;
}

}  // namespace detail

void Block::record_stream(const Stream& user) {
  if (user == stream_) return;  // the owner needs no event: its work is in order
  {
    std::lock_guard<std::mutex> lock(users_mutex_);
    std::erase_if(users_, [](const Stream::Weak& w) { return w.expired(); });  // done, gone
    for (const Stream::Weak& w : users_)
      if (w.lock() == user.impl()) return;
    users_.push_back(user.weak());
  }
  // A first use by another stream: after the owner's work of the memory's previous life. A
  // stream that captures a CUDA graph cannot wait for an event recorded outside the capture
  // (CUDA refuses it): the host waits instead, before the graph exists, so before any replay.
  // (The user is being given work by this thread: if it captures, this thread captures it.)
  if (owner_before_.recorded() && !owner_before_.query()) {
    if (user.capturing())
      owner_before_.synchronize();
    else
      user.wait(owner_before_);
  }
}

bool Block::used_elsewhere() {
  std::lock_guard<std::mutex> lock(users_mutex_);
  std::erase_if(users_, [](const Stream::Weak& w) { return w.expired(); });  // done, gone
  return !users_.empty();
}

void Block::adopt_users(Block& part) {
  std::scoped_lock lock(users_mutex_, part.users_mutex_);
  for (const Stream::Weak& w : part.users_) {
    const std::shared_ptr<detail::StreamImpl> user = w.lock();
    if (!user) continue;  // done, gone
    if (std::none_of(users_.begin(), users_.end(),
                     [&](const Stream::Weak& mine) { return mine.lock() == user; }))
      users_.push_back(w);
  }
}

uint64_t Allocator::round_size(uint64_t bytes) {
  if (bytes <= 512) return 512;
  const uint64_t step = std::max<uint64_t>(512, std::bit_floor(bytes - 1) / 4);
  return (bytes + step - 1) / step * step;
}

bool Allocator::caching() {
  static const bool on = [] {
    const char* off = std::getenv("BRIGADE_NO_MEMORY_CACHING");
    return off == nullptr || std::string_view(off).empty() || std::string_view(off) == "0";
  }();
  return on;
}

uint64_t Allocator::block_size(uint64_t bytes) {
  return caching() ? round_size(bytes) : std::max<uint64_t>(bytes, 1);
}

Allocator& Allocator::of(const Device& device) {
  check_device_available(device);
  static std::mutex* mutex = new std::mutex;
  static auto* allocators = new std::map<Device, std::unique_ptr<Allocator>>;  // never freed
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*allocators)[device];
  if (!slot) slot = std::make_unique<Allocator>(device);
  return *slot;
}

Allocator& Allocator::pinned_host(const Device& cpu_device) {
  BRIGADE_CHECK(cpu_device.is_cpu(), "pinned host memory belongs to a CPU device, not "
                                         << cpu_device);
#if defined(BRIGADE_HAVE_CUDA)
  static std::mutex* mutex = new std::mutex;
  static auto* allocators = new std::map<Device, std::unique_ptr<Allocator>>;  // never freed
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*allocators)[cpu_device];
  if (!slot) slot = std::make_unique<Allocator>(cpu_device, /*pinned=*/true);
  return *slot;
#else
  throw Error(cpu_device.str() + ": pinned host memory needs a CUDA build");
#endif
}

Allocator::Allocator(Device device, bool pinned) : device_(device), pinned_(pinned) {
#if defined(BRIGADE_HAVE_CUDA)
  if (device_.is_cuda()) cuda_capacity_ = detail::cuda_total_memory(device_);  // checked by of()
#endif
}

std::shared_ptr<Block> Allocator::allocate(uint64_t bytes, const Stream& stream) {
  BRIGADE_CHECK(stream.device() == device_, device_ << ": allocation for " << stream.str()
                                                    << ", a stream of another device");
  PoolScope* const scope = detail::pool_scope_of_this_thread();
  if (scope && scope->pool_.stream() == stream) return scope->serve(bytes);
  return obtain(bytes, block_size(bytes), stream);
}

std::shared_ptr<Block> Allocator::allocate_exact(uint64_t bytes, const Stream& stream) {
  BRIGADE_CHECK(stream.device() == device_, device_ << ": allocation for " << stream.str()
                                                    << ", a stream of another device");
  return obtain(bytes, caching() ? (std::max<uint64_t>(bytes, 1) + 511) / 512 * 512
                                 : std::max<uint64_t>(bytes, 1),
                stream);
}

// A block of `size` bytes for a request of `bytes`: the cache's, or new memory.
std::shared_ptr<Block> Allocator::obtain(uint64_t bytes, uint64_t size, const Stream& stream) {
  Event owner_before;
  std::unique_lock<std::mutex> lock(mutex_);
  void* data = take_or_obtain_locked(size, stream, &owner_before);
  if (!data && waiting_could_help_locked(size))
    data = wait_for_pending_then_retry_locked(lock, bytes, size, stream, &owner_before);
  if (!data) throw out_of_memory_locked(bytes, "");
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  lock.unlock();
#if defined(BRIGADE_HAVE_CUDA)
  if (device_.is_cuda() || pinned_) detail::cuda_lend(data, bytes);
#endif
  std::shared_ptr<Block> block(new Block(data, size, stream, std::move(owner_before)),
                               [this](Block* b) { release(b); });
  AllocationTrace* const trace = detail::recorded_trace_of_this_thread();
  if (trace && trace->stream_id_ == stream.id()) {
    block->traced_request_ = trace->allocated(bytes);
    block->trace_ = trace->shared_from_this();
  }
  return block;
}

// The cache first; else new memory within the capacity, after releasing the cached blocks
// whose work is done. Null when neither gives a block without waiting.
void* Allocator::take_or_obtain_locked(uint64_t size, const Stream& stream, Event* owner_before) {
  void* data = nullptr;
  if (caching())
    data = take_from_cache_locked(size, stream, owner_before);
  else
    free_ready_locked();  // what was freed since, and whose work is done
  if (data) return data;
  const uint64_t cap = capacity();
  auto fits = [&] { return cap == 0 || reserved_ + size <= cap; };
  if (!fits()) free_ready_locked();  // make room from the cache first
  if (!fits()) return nullptr;
  data = raw_allocate(size);
  if (!data && reserved_ != in_use_) {  // the system said no: give back the cache, retry
    free_ready_locked();
    data = raw_allocate(size);
  }
  if (data) reserved_ += size;
  return data;
}

// First choice: a block this stream freed itself (only other users must be done; its own
// event, if pending, goes with the block: see record_stream). Second: a block of another
// stream whose every event has completed.
void* Allocator::take_from_cache_locked(uint64_t size, const Stream& stream, Event* owner_before) {
  auto bin = cache_.find(size);
  if (bin == cache_.end()) return nullptr;
  auto& blocks = bin->second;
  auto take = [&](auto it) {
    void* data = it->data;
    blocks.erase(it);
    return data;
  };
  for (auto it = blocks.begin(); it != blocks.end(); ++it)
    if (it->owner_stream_id == stream.id() && all_done(it->users_done)) {
      if (!it->owner_done.query()) *owner_before = it->owner_done;
      return take(it);
    }
  for (auto it = blocks.begin(); it != blocks.end(); ++it)
    if (it->owner_done.query() && all_done(it->users_done)) return take(it);
  return nullptr;
}

// Runs when the last shared_ptr to `block` goes (so nobody else can touch its users).
// On emulated GPUs (-Dcuda=emulated) the block is also poisoned here, filled with 0xFF (NaN in
// every float) on its owner stream after its users' work and before owner_done, so a use the
// rules of allocator.h do not order (a stream that read the block undeclared, a reuse without
// the wait) reads NaN and the parity tests fail, where a real GPU would read stale data that
// looks right.
void Allocator::release(Block* block) {
  // A capture in progress on this thread: its events would be captured.
  if (PoolScope* const scope = detail::pool_scope_of_this_thread()) {
    scope->held_back_.push_back({this, block});
    return;
  }
  if (block->trace_) block->trace_->freed(block->traced_request_, block->used_elsewhere());
  const uint64_t size = block->size_;
  Cached cached;
  cached.data = block->data_;
  cached.owner_stream_id = block->stream_.id();
  bool cacheable = true, deferred = false;
  try {
    // Recorded outside the allocator's lock: recording enqueues on streams. Not on a stream
    // that is capturing a CUDA graph (another thread's): the event would be the graph's.
    bool host_user = false;  // a CPU stream still uses it (a GPU staging buffer's filler)
    for (const Stream::Weak& weak : block->users_)
      if (const std::optional<Stream> user = Stream::from_weak(weak)) {  // else its work is done
        Event done;
        if (!user->unless_capturing([&] { done.record(*user); })) {
          deferred = true;
          break;
        }
        cached.users_done.push_back(done);
        host_user = host_user || (user->device().is_cpu() && !done.query());
      }
    deferred = deferred || !block->stream_.unless_capturing([&] {
#if defined(BRIGADE_HAVE_CUDA)
      // Emulated GPUs: NaN into the returning block (allocator_cuda.cpp). A CPU stream's event
      // cannot be waited for on the GPU without blocking this thread: a block with a host user
      // keeps its contents.
      if (device_.is_cuda() && !pinned_ && !host_user)
        detail::cuda_poison_returned(block->data_, size, block->stream_, cached.users_done);
      if (device_.is_cuda() || pinned_) detail::cuda_lend(block->data_, 0);
#endif
      cached.owner_done.record(block->stream_);  // after the poison: reuse waits for it too
    });
  } catch (const std::exception& e) {
    // A deleter must not throw (a CUDA device in a failed state can make recording fail).
    // Without the events we cannot know when the memory is safe: keep it out of the cache.
    // Said once per device: a GPU with a sticky error fails every record after it, and a
    // failed step frees hundreds of blocks (the step's own error is what the user must read).
    if (first_not_reused(device_, pinned_))
      std::fprintf(stderr,
                   "brigade: %s: freed blocks are no longer reused (the first, of %s: %s); "
                   "later ones are not reported\n",
                   device_.str().c_str(), format_bytes(size).c_str(), e.what());
    cacheable = false;
  }
  if (deferred && cacheable) {  // freed again once the capture has ended
    std::lock_guard<std::mutex> lock(deferred_mutex());
    deferred_frees().push_back({this, block});
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= size;
    if (cacheable) cache_[size].push_back(std::move(cached));
    if (!caching()) free_ready_locked();  // the cache only holds blocks still in flight
  }
  delete block;  // drops its stream handles, outside the lock
}

void Allocator::release_deferred() {
  std::vector<std::pair<Allocator*, Block*>> frees;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex());
    frees.swap(deferred_frees());
  }
  for (const auto& [allocator, block] : frees) allocator->release(block);  // or deferred again
}

void Allocator::free_ready_locked() {
  // A ready block goes back to the system, unless its GPU captures (capture_scopes.h): then it
  // stays cached, for a later call.
  const std::optional<int> held_by = gpu_holding_returns(device_, pinned_);
  const auto give_back = [&](void* data) {
    if (!held_by) {
      raw_free(data);
      return true;
    }
    return detail::give_back_unless_capturing(*held_by, [&] { raw_free(data); });
  };
  for (auto& [size, blocks] : cache_) {
    auto ready = [](const Cached& c) { return c.owner_done.query() && all_done(c.users_done); };
    for (auto it = blocks.begin(); it != blocks.end();) {
      if (ready(*it) && give_back(it->data)) {
        reserved_ -= size;
        it = blocks.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void Allocator::empty_cache() { empty_cache_until(std::nullopt); }

std::string Allocator::empty_cache_until(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::map<uint64_t, std::vector<Cached>> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(cache_);
  }
  std::string still_pending;  // the first event that had not run by the deadline
  // Whether `e`'s work has run (by the deadline, if any). A failed stream still completes its
  // markers; its error is not ours to report.
  const auto ran = [&](const Event& e) {
    if (deadline) {
      if (e.wait_until(*deadline)) return true;
      if (still_pending.empty()) still_pending = e.current_record()->where();
      return false;
    }
    try {
      e.synchronize();
    } catch (const StreamError&) {
    }
    return true;
  };
  for (auto& [size, blocks] : taken) {
    for (auto& c : blocks) {
      const bool done =
          ran(c.owner_done) && std::all_of(c.users_done.begin(), c.users_done.end(), ran);
      // Given back once its GPU's captures have ended (capture_scopes.h): they take this
      // allocator's lock to allocate, so its wait holds none.
      bool given_back = false;
      if (done) {
        const std::optional<int> gpu = gpu_holding_returns(device_, pinned_);
        if (gpu) {
          given_back = detail::give_back_after_captures(*gpu, deadline, [&] { raw_free(c.data); });
          if (!given_back && still_pending.empty())
            still_pending = "a CUDA graph's capture on " +
                            (*gpu < 0 ? std::string("a GPU") : device_.str()) +
                            ", which holds back every return of its memory";
        } else {
          raw_free(c.data);
          given_back = true;
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (!given_back) {  // still in flight, or held back: back to the cache, as it was
        cache_[size].push_back(std::move(c));
        continue;
      }
      reserved_ -= size;
    }
  }
  return still_pending;
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {in_use_, reserved_, peak_in_use_, capacity(), waits_for_pending_};
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_in_use_ = in_use_;
}

uint64_t Allocator::capacity() const {
  if (pinned_) return 0;
  if (device_.is_cpu()) return cpu_device_options(device_.index).capacity_bytes;
  return cuda_capacity_;
}

void* Allocator::raw_allocate(uint64_t size) {
#if defined(BRIGADE_HAVE_CUDA)
  if (pinned_) return detail::cuda_pinned_allocate(size);
#endif
  if (device_.is_cpu()) return ::operator new(size, cpu_alignment, std::nothrow);
#if defined(BRIGADE_HAVE_CUDA)
  return detail::cuda_raw_allocate(device_, size);
#else
  throw Error(device_.str() + ": this build has no CUDA support");
#endif
}

void Allocator::raw_free(void* data) {
#if defined(BRIGADE_HAVE_CUDA)
  if (pinned_) {
    detail::cuda_pinned_free(data);
    return;
  }
#endif
  if (device_.is_cpu()) {
    ::operator delete(data, cpu_alignment);
    return;
  }
#if defined(BRIGADE_HAVE_CUDA)
  detail::cuda_raw_free(device_, data);
#endif
}

}  // namespace brigade

// Allocator: per-device caching memory allocator, stream-safe.
//
// Device memory is slow to obtain (cudaMalloc synchronises the device; big host
// allocations fault pages in), so freed blocks are kept in a cache and handed out again.
//
// Sizes are rounded into bins, four per power of two (see round_size), so that a request
// of 1000 bytes and one of 900 land in the same bin and reuse each other's blocks. A cached
// block serves only requests of its own bin: no splitting, no fragmentation bookkeeping.
//
// Stream safety (the bug of pytorch#23729). A block is allocated on a stream, its owner.
// Work on other streams that touches it must be declared with block->record_stream(s).
// The block does not keep those streams alive: a long-lived block (a parameter) is used by
// the streams of one pipeline step after another, and a stream that is gone has run its work.
// When the block is freed (its last shared_ptr goes), the allocator records an event on
// the owner and on every declared user. The block is then handed out again
//   - to its owner stream as soon as the users' events have completed: the owner's own
//     later work runs after its earlier work, so it needs no event. The new block keeps the
//     owner's event while it is pending: a stream other than the owner that is declared a
//     user (record_stream, before its work on the block is enqueued: a GPU staging buffer
//     written by a host stream, a receive buffer written by the sender's copy) first waits
//     for it, so it never writes over memory the owner's earlier work still reads (a user
//     that is capturing a CUDA graph cannot wait for an event outside the capture: the host
//     waits for it instead);
//   - to any other stream only once all of those events, the owner's included, have.
// Freeing therefore never waits; the waiting is in the reuse test and in the first
// record_stream of another stream.
//
// BRIGADE_NO_MEMORY_CACHING=1 turns the cache off, for finding memory bugs (as PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING does): each block is exactly as large as asked and goes back
// to the system as soon as the events above say its work is done, never to another tensor.
// AddressSanitizer then sees a read one byte past a tensor, and a use of memory after its
// tensor was freed. Slower: on a GPU each return is a cudaFree, which waits for the device.
// No memory goes back to CUDA while a stream of its GPU captures a CUDA graph, on any thread
// (capture_scopes.h): the block stays cached, given back by a later return.
// Emulated GPUs see both with the cache on too: the allocator tells them how many bytes of a
// block its tensor asked for, and when the block is back in the cache (allocator_cuda.cpp).
//
// Counters: in use (bytes of live blocks), reserved (in use + cached), peak in use. A CPU
// device may have a capacity (configure_cpu_device); a CUDA device's is its memory.
// Going over it (or the system refusing memory) first releases the cached blocks whose work is
// done. If that is not enough, but the request fits beside the live blocks, the allocation
// waits for the work of the blocks still in flight (freed by the host, still used by queued
// work), returns the whole cache to the system and tries once more (PyTorch's caching
// allocator does the same before it gives up): memory about to be freed is never reported as
// missing. That wait has a deadline, BRIGADE_ALLOC_WAIT_S (default 120 s): queued work that
// cannot run (an NCCL send whose peer rank is itself waiting for memory) ends it with an
// OutOfMemoryError that says it waited and for what, not a hang.
// A request that cannot fit beside the live blocks throws OutOfMemoryError at once:
//   cpu:1: out of memory allocating 64.0 MiB (in use 200.0 MiB, reserved 230.0 MiB, capacity 256.0 MiB)
// A task of a CPU stream never waits (allocator_out_of_memory.cpp says why): it throws, saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/event.h"
#include "engine/stream.h"

namespace brigade {

struct MemoryStats {
  uint64_t in_use = 0;
  uint64_t reserved = 0;
  uint64_t peak_in_use = 0;
  uint64_t capacity = 0;  // 0 = unlimited
  // Allocations that found no room but would fit once freed blocks' queued work has run:
  // each waited for that work and emptied the cache before its one retry.
  uint64_t waits_for_pending = 0;
};

class AllocationTrace;
class Allocator;

// A block of device memory. Alive while a shared_ptr owns it; then back to its allocator.
class Block {
 public:
  void* data() const { return data_; }
  uint64_t size() const { return size_; }  // Allocator::block_size of the request
  Device device() const { return stream_.device(); }
  const Stream& stream() const { return stream_; }  // the owner stream

  // Declares that work on `user` uses this block: see the top of this file. Call it before
  // enqueuing that work: a user's first declaration may make it wait for the owner's work of
  // the memory's previous life.
  void record_stream(const Stream& user);
  // Whether a stream other than the owner, still alive, was declared a user.
  bool used_elsewhere();

 private:
  friend class Allocator;
  friend class AllocationTrace;
  friend class GraphPool;  // serves ranges of its arena as blocks of their own (graph_memory.h)
  Block(void* data, uint64_t size, Stream stream, Event owner_before)
      : data_(data), size_(size), stream_(std::move(stream)),
        owner_before_(std::move(owner_before)) {}
  // Takes on the other streams `part` was used by (`part`: a range of this block's bytes,
  // served as a block of its own, whose handle is going): this block's next life waits for
  // their work as for its own users'.
  void adopt_users(Block& part);

  void* data_;
  uint64_t size_;
  Stream stream_;
  Event owner_before_;  // the owner's work of the previous life, when handed out before it ran
  std::mutex users_mutex_;
  std::vector<Stream::Weak> users_;  // other streams declared by record_stream
  // Where a graph's memory is planned (graph_memory.h): the trace of its request, and which.
  std::shared_ptr<AllocationTrace> trace_;
  uint64_t traced_request_ = 0;
};

class Allocator {
 public:
  // The allocator of `device` (one per device, created on first use, never destroyed).
  static Allocator& of(const Device& device);
  // A CPU device's second allocator, of page-locked host memory (cudaHostAlloc; CUDA builds
  // only): the host side of copies to and from GPUs, which the GPU's copy engine then reads
  // or writes directly, asynchronously, instead of through a staging copy of pageable
  // memory. No capacity (the CPU device's limit counts its ordinary memory).
  static Allocator& pinned_host(const Device& cpu_device);

  // At least `bytes` bytes (64-byte aligned on CPU) for use on `stream`, which must be a
  // stream of this allocator's device. 0 bytes gives the smallest bin.
  std::shared_ptr<Block> allocate(uint64_t bytes, const Stream& stream);
  // The same, of `bytes` rounded up to 512 only, not to its bin: for memory held whole and long
  // (a graph pool's arena, graph_memory.h), where a bin's slack (up to 25%) would be held for
  // nothing. Freed, it is cached under that size, and serves requests of it alone. Never from
  // a graph pool.
  std::shared_ptr<Block> allocate_exact(uint64_t bytes, const Stream& stream);

  MemoryStats stats() const;
  void reset_peak();
  // Returns every cached block to the system (waiting for their pending events first, and
  // for the captures under way on the GPU, except on a thread that captures: capture_scopes.h).
  void empty_cache();
  // The frees that found a stream of their block capturing a CUDA graph, made now (by
  // CudaGraph::capture, once its capture has ended). A free records events on the streams that
  // used its block, which must not go into another thread's graph: PyTorch's caching allocator
  // defers them the same way. Until then the block counts as in use.
  static void release_deferred();

  // The bin of a request: multiples of 512 B up to 2 KiB, then four bins per power of two
  // (2.0, 2.5, 3.0, 3.5 KiB, 4 KiB, 5 KiB, ...): at most 25% of a block is slack.
  static uint64_t round_size(uint64_t bytes);
  // False under BRIGADE_NO_MEMORY_CACHING=1 (read once, at the first call).
  static bool caching();
  // The size of the block a request of `bytes` gets: its bin, or without caching `bytes`
  // itself (at least 1).
  static uint64_t block_size(uint64_t bytes);

  Device device() const { return device_; }

  explicit Allocator(Device device, bool pinned = false);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

 private:
  friend class PoolScope;  // releases the frees it held back (graph_memory.h)
  // A freed block waiting in the cache, with the events that say when it is safe.
  struct Cached {
    void* data = nullptr;
    uint64_t owner_stream_id = 0;
    Event owner_done;               // recorded on the owner stream at free time
    std::vector<Event> users_done;  // recorded on each record_stream user at free time
  };

  std::shared_ptr<Block> obtain(uint64_t bytes, uint64_t size, const Stream& stream);
  void release(Block* block);  // the shared_ptr deleter
  // A cached block for `stream` (null if none): its memory, and the owner's event it skipped.
  void* take_from_cache_locked(uint64_t size, const Stream& stream, Event* owner_before);
  // One attempt that never waits: the cache, else new memory within the capacity. Null if none.
  void* take_or_obtain_locked(uint64_t size, const Stream& stream, Event* owner_before);
  void free_ready_locked();    // returns ready cached blocks to the system
  // Returns every cached block whose events have run by `deadline` (none: however long it
  // takes) to the system, once no capture is under way on its GPU (capture_scopes.h); the
  // others stay cached. Where the first still pending waits ("cpu:0 stream#3, position 9; that
  // stream is at 4", or the capture that held a block back), empty when none is.
  std::string empty_cache_until(std::optional<std::chrono::steady_clock::time_point> deadline);
  // When a request does not fit (allocator_out_of_memory.cpp). With `lock` (of mutex_) held
  // and waiting_could_help_locked: waits for the cached blocks' queued work, empties the cache
  // and tries once more; the memory (`lock` held again), or an OutOfMemoryError.
  void* wait_for_pending_then_retry_locked(std::unique_lock<std::mutex>& lock, uint64_t bytes,
                                           uint64_t size, const Stream& stream,
                                           Event* owner_before);
  bool waiting_could_help_locked(uint64_t size) const;
  void refuse_to_wait_inside_stream_work_locked(uint64_t bytes);  // throws on a stream's worker
  OutOfMemoryError out_of_memory_locked(uint64_t bytes, const std::string& why) const;
  static std::chrono::duration<double> pending_wait_limit();  // BRIGADE_ALLOC_WAIT_S
  uint64_t capacity() const;
  void* raw_allocate(uint64_t size);
  void raw_free(void* data);

  const Device device_;
  const bool pinned_;  // pinned_host(): page-locked host memory
  mutable std::mutex mutex_;
  std::map<uint64_t, std::vector<Cached>> cache_;  // bin size -> freed blocks
  uint64_t in_use_ = 0;
  uint64_t reserved_ = 0;
  uint64_t peak_in_use_ = 0;
  uint64_t waits_for_pending_ = 0;
  uint64_t cuda_capacity_ = 0;  // a CUDA device's memory (its capacity)
};

}  // namespace brigade

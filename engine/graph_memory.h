// Memory for CUDA graphs (pipeline/runtime/device_graphs.h).
//
// The work a capture records allocates its tensors as it always does, but a capture may not
// obtain memory: cudaMalloc is refused while a stream of this thread captures, and a cached
// block's events would be recorded into the graph. And a replay writes the addresses its
// capture was given, so the blocks a capture was served must stay the graphs' while they live.
// So the memory of a sequence of captures on one stream (a device's actions of one step, in
// the order their graphs will be launched) is planned from an eager run of the same work, and
// set aside before the first capture begins:
//
//   1. AllocationTrace: while the eager run's work is enqueued (one Recording per action), each
//      request it makes on the stream, in order, and when the host frees each of those blocks
//      (on the recording thread, anywhere in the sequence: a tape is freed between actions).
//   2. GraphMemoryPlan (plan_graph_memory): the requests packed into slots, blocks that serve
//      several requests whose lives do not overlap. A slot is as large as the largest request
//      it serves; the packing is greedy by size (the largest request first, into the smallest
//      slot whose requests are all dead or not yet born while it lives, else a new slot), the
//      "shared objects" planner of TFLite's GPU delegate (Lee et al., "On-Device Neural Net
//      Inference with Mobile GPUs", 2019). The slots then hold about what the eager run had
//      live at its peak, where one block per distinct size (as the allocator's cache, or a pool
//      that matched sizes) holds what the cache held.
//      Why slots, each a block of its own, and not offsets in one arena (that paper's other
//      planner): offsets come nearer the peak (the question's network on one stage, batch 128:
//      67.7 MiB in one arena, the eager peak exactly, against 78.6 MiB of slots), but the
//      emulated GPUs check happens-before per allocation (kernels/emu/cudart/hb.h): the
//      tensors of one arena would all seem one, their every pair on two streams a race, and a
//      real race between two lives of the same bytes would hide among them. A slot's tensors
//      follow one another on one stream, which that check sees.
//   3. GraphPool: the slots, taken from the allocator before the first capture; while a
//      PoolScope is alive on the capturing thread, its requests on the stream are served from
//      them, request i by the slot the plan gave it. The tensor served holds its slot (a
//      lease): freed, it gives the slot back to the pool, which serves the next request
//      planned for it.
//
// Same stream, same order: a slot serves a request only once the work of its previous tensor
// is enqueued before it on the same stream, in the capture and in every replay (the graphs are
// launched in capture order), so no event is needed. Not a block another stream used (a copy
// sent from it): its reuse would need that stream's event, which a graph cannot wait for; the
// trace counts such a block as never freed, and the pool never takes it back.
//
// What a graph hands out again at each replay (its outputs), and what it reads in place (the
// output of a graph before it on the stream), it holds through the pool's own handle of the
// slot (unleased()), not the lease: the slot serves later requests once the sequence frees the
// tensor, as the eager run freed it. A replay writes the tensor's values where its capture
// did, and the replays after it in the sequence read them there before the slot's next tensor
// is written: the capture's leases ordered them so.
//
// The plan is exact when the capture frees what the eager run freed, where it freed it: the
// same code, the same order. Should a capture ever ask for more than planned, or find its
// slot still held, it is served the smallest free slot large enough, and with none, it throws,
// naming the stream and the size: the capture ends, dropped, and the step fails.
//
// On emulated GPUs a slot is lent (allocator.h) for its own size, the largest request it
// serves, once: every replay runs the kernels of all of the slot's tensors, each of its own
// size, so the emulator's bounds checks stop at the slot's end, not at each tensor's.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/stream.h"
#include "engine/tensor.h"

namespace brigade {

// One request of a traced sequence: the bytes asked, and the position of its free among the
// sequence's events (requests and frees counted together); kNever if it was not freed.
struct TracedRequest {
  static constexpr uint64_t kNever = ~uint64_t{0};
  uint64_t bytes = 0;
  uint64_t asked_at = 0;
  uint64_t freed_at = kNever;
  bool operator==(const TracedRequest&) const = default;
};

struct GraphMemoryPlan {
  std::vector<uint64_t> slot_bytes;     // [slot] the largest request it serves
  std::vector<uint64_t> request_bytes;  // [request] as traced
  std::vector<uint32_t> request_slot;   // [request] the slot that serves it
  uint64_t bytes() const;               // the slots' bytes together
};

// The slots for `requests` (step 2 above): two requests share a slot only if one is freed at or
// before the other is asked for. Deterministic: ties go to the earlier request.
GraphMemoryPlan plan_graph_memory(const std::vector<TracedRequest>& requests);

// Step 1 above. Shared with the blocks it traces, whose frees may come after it is closed.
class AllocationTrace : public std::enable_shared_from_this<AllocationTrace> {
 public:
  // Traces requests on `stream` made by the calling thread, and that thread's frees of them.
  static std::shared_ptr<AllocationTrace> create(const Stream& stream);

  // While alive: the calling thread's requests on the trace's stream are traced. One at a time
  // per thread; not beside a PoolScope.
  class Recording {
   public:
    explicit Recording(AllocationTrace& trace);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
  };

  // The sequence is over: later frees are not part of it.
  void close();
  std::vector<TracedRequest> requests() const;

 private:
  friend class Allocator;
  explicit AllocationTrace(const Stream& stream);
  uint64_t allocated(uint64_t bytes);  // the request's index
  void freed(uint64_t request, bool used_elsewhere);

  const uint64_t stream_id_;
  const std::thread::id thread_;
  mutable std::mutex mutex_;
  bool open_ = true;
  uint64_t events_ = 0;  // requests and frees so far
  std::vector<TracedRequest> requests_;
};

// Step 3 above. Destroyed with the graphs: its slots go back to the allocator once no tensor
// holds them either.
class GraphPool {
 public:
  // Takes the plan's slots on `stream` now (outside any capture).
  GraphPool(Stream stream, const GraphMemoryPlan& plan);
  const Stream& stream() const { return stream_; }
  // The sequence is captured: a slot freed now serves nothing more.
  void close();
  uint64_t bytes() const;  // the slots' memory
  // Whether `t` lies in one of the slots (a tensor a capture was served).
  bool holds(const Tensor& t) const;
  // `t`, one of the slots' tensors, through the pool's own handle of its slot: held so, it
  // keeps the memory but gives nothing back when dropped (the top of this file says why).
  Tensor unleased(const Tensor& t) const;

 private:
  friend class PoolScope;
  struct State;
  std::shared_ptr<Block> serve(uint64_t bytes);
  std::shared_ptr<Block> slot_of(const Tensor& t) const;  // the pool's handle, or null
  Stream stream_;
  std::shared_ptr<State> state_;
};

// While alive: this thread's requests on the pool's stream are served by the pool, and its
// frees of ordinary blocks are held back until it is destroyed (after the capture: a free
// records events). One at a time per thread; not beside a Recording.
class PoolScope {
 public:
  explicit PoolScope(GraphPool& pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  friend class Allocator;
  std::shared_ptr<Block> serve(uint64_t bytes) { return pool_.serve(bytes); }
  GraphPool& pool_;
  std::vector<std::pair<Allocator*, Block*>> held_back_;  // frees, until the destructor
};

}  // namespace brigade

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
//   2. GraphMemoryPlan (plan_graph_memory): an offset for each request in one arena, so that
//      two requests whose lives overlap never share a byte. Greedy by size: the largest request
//      first, into the smallest gap left between the requests already placed whose lives
//      overlap its own, else after the last of them. This is the "greedy by size" offset
//      planner of TFLite's GPU delegate (Pisarchyk and Lee, "Efficient Memory Management for
//      Deep Neural Net Inference", 2020); on the question's network (one stage, batch 128) it
//      plans 67.7 MiB, the eager run's peak, where the same paper's "shared objects" (blocks
//      each as large as the largest request it serves, shared by requests whose lives do not
//      overlap) hold 78.6 MiB, and one block per distinct size (the allocator's cache, or a
//      pool matching sizes) more still.
//   3. GraphPool: the arena, one block taken from the allocator before the first capture;
//      while a PoolScope is alive on the capturing thread, its requests on the stream are
//      served from it, request i at the offset the plan gave it, as a block of its own (a
//      range) whose bytes the tensor alone uses while it lives. The tensor served holds its
//      range (a lease): freed, it gives the range back, and the bytes serve the next requests
//      planned over them.
//
// Same stream, same order: a range's bytes serve another request only once the work of their
// previous tensor is enqueued before it on the same stream, in the capture and in every replay
// (the graphs are launched in capture order), so no event is needed. Not bytes another stream
// used (a copy sent from them): their reuse would need that stream's event, which a graph
// cannot wait for; the trace counts such a block as never freed, and the pool never takes its
// range back. When the range itself goes, the arena takes on its other streams, so that the
// arena's own return to the allocator waits for their work (Block::adopt_users).
//
// What a graph hands out again at each replay (its outputs), and what it reads in place (the
// output of a graph before it on the stream), it holds through the pool's own handle of the
// range (unleased()), not the lease: the bytes serve later requests once the sequence frees
// the tensor, as the eager run freed it. A replay writes the tensor's values where its capture
// did, and the replays after it in the sequence read them there before the bytes' next tensor
// is written: the capture's leases ordered them so.
//
// The plan is exact when the capture frees what the eager run freed, where it freed it: the
// same code, the same order. Should a capture ever ask for more than planned, or find its
// planned bytes still held, it is served the smallest gap of the arena that holds it, and
// with none, it throws, naming the stream and the size: the capture ends, dropped, and the
// step fails.
//
// On emulated GPUs the arena is lent (allocator.h) whole, once: the bounds checks of a replay
// stop at the arena's end, not at each tensor's (the eager run, the same kernels on the same
// sizes, is checked tensor by tensor). The happens-before check follows each range's bytes on
// their own (kernels/emu/cudart/hb.h): two tensors of the arena are two memories to it, and
// two lives of the same bytes that nothing orders are a race it reports.
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
  // Where a range starts: every offset is a multiple of it (the alignment cudaMalloc gives,
  // which vendor libraries and vectorised loads rely on), every range a whole number of it.
  static constexpr uint64_t kAlignment = 256;
  static uint64_t range_bytes(uint64_t request_bytes);  // rounded up to kAlignment, at least one

  uint64_t arena_bytes = 0;              // the end of the last range
  std::vector<uint64_t> request_bytes;   // [request] as traced
  std::vector<uint64_t> request_offset;  // [request] where in the arena its range starts
  uint64_t bytes() const { return arena_bytes; }
};

// The offsets for `requests` (step 2 above): two requests overlap in the arena only if one is
// freed at or before the other is asked for. Deterministic: ties go to the earlier request.
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

// Step 3 above. Destroyed with the graphs: its arena goes back to the allocator once no tensor
// holds a range of it either.
class GraphPool {
 public:
  // Takes the plan's arena on `stream` now (outside any capture).
  GraphPool(Stream stream, const GraphMemoryPlan& plan);
  const Stream& stream() const { return stream_; }
  // The sequence is captured: a range freed now serves nothing more.
  void close();
  uint64_t bytes() const;  // the arena's memory
  // Whether `t` is one of the pool's ranges (a tensor a capture was served).
  bool holds(const Tensor& t) const;
  // `t`, one of the pool's tensors, through the pool's own handle of its range: held so, it
  // keeps the memory but gives nothing back when dropped (the top of this file says why).
  Tensor unleased(const Tensor& t) const;

 private:
  friend class PoolScope;
  struct State;
  std::shared_ptr<Block> serve(uint64_t bytes);
  std::shared_ptr<Block> range_of(const Tensor& t) const;  // the pool's handle, or null
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

// Split-K's scratch (gemm_split_k.cuh): the partial sums and tickets a split launch of either
// hand-written GEMM needs, kept by its stream. The design is the header's; this file is where
// the memory comes from and how the tickets start at zero.
#include <memory>
#include <mutex>

#include "kernels/emu/kernel.h"
#include "engine/allocator.h"
#if defined(BRIGADE_HAVE_CUDA)
#include "engine/cuda_graph.h"
#endif
#include "kernels/cuda/gemm_split_k.cuh"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// The tickets start at zero: once, when a stream's scratch is made (each launch's last blocks
// reset theirs).
__global__ void split_k_clear_tickets_kernel(unsigned* tickets) { tickets[threadIdx.x] = 0; }

namespace {

// What a stream keeps: taken from the device's allocator, so it is device memory on a GPU and
// counted in its memory statistics. One scratch serves both GEMMs: a stream runs one launch
// at a time.
struct SplitScratch {
  std::mutex mutex;                 // host threads sharing a stream
  std::shared_ptr<Block> tickets;   // kSplitBlocks counters, zero between launches
  std::shared_ptr<Block> partials;  // kMostPartialFloats floats
};

}  // namespace

SplitBuffers split_k_scratch(const Stream& stream, int64_t partial_floats) {
  BRIGADE_CHECK(partial_floats > 0 && partial_floats <= kMostPartialFloats,
                "split_k_scratch: a split launch asked for " << partial_floats
                    << " partial floats; at most " << kMostPartialFloats << " are kept");
  static const char key = 0;  // its address names the scratch among what a stream keeps
  const std::shared_ptr<SplitScratch> scratch = std::static_pointer_cast<SplitScratch>(
      stream.kept(&key, [] { return std::make_shared<SplitScratch>(); }));
  std::lock_guard<std::mutex> lock(scratch->mutex);
  // A block holds its owner stream, and a stream keeping a block of its own would never be
  // destroyed: the device's default stream owns them, `stream` is declared their user (its
  // work waits for the memory's previous life, and the allocator for this stream's work).
  const Stream owner = Stream::default_for(stream.device());
  Allocator& allocator = Allocator::of(stream.device());
#if defined(BRIGADE_HAVE_CUDA)
  // A stream's first split launch may come inside a graph's capture (CudaGraph::capture): the
  // scratch outlives the graph with the stream, so its memory is taken in a Relaxed scope
  // (cudaMalloc is refused to a thread that records a graph, engine/cuda_graph.h).
  const CudaGraph::Relaxed relaxed;
#endif
  if (scratch->tickets == nullptr) {
    scratch->tickets = allocator.allocate(kSplitBlocks * sizeof(unsigned), owner);
    scratch->tickets->record_stream(stream);
    auto* const tickets = static_cast<unsigned*>(scratch->tickets->data());
    const bool cleared_on_stream = stream.unless_capturing([&] {
      BRIGADE_LAUNCH(split_k_clear_tickets_kernel, 1, static_cast<int>(kSplitBlocks), 0, stream,
                     BRIGADE_EXTENT(tickets, kSplitBlocks));
    });
    if (!cleared_on_stream) {
      // `stream` is capturing: cleared there, the tickets would be zeroed by the graph's
      // replays only, and an eager launch before the first replay would find garbage. They are
      // cleared on their owner instead, the host waiting, before anything of `stream` runs.
      BRIGADE_LAUNCH(split_k_clear_tickets_kernel, 1, static_cast<int>(kSplitBlocks), 0, owner,
                     BRIGADE_EXTENT(tickets, kSplitBlocks));
      owner.synchronize();
    }
  }
  if (scratch->partials == nullptr) {
    scratch->partials = allocator.allocate(
        static_cast<uint64_t>(kMostPartialFloats) * sizeof(float), owner);
    scratch->partials->record_stream(stream);
  }
  return {static_cast<float*>(scratch->partials->data()),
          static_cast<unsigned*>(scratch->tickets->data())};
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

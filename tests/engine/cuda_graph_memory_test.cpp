// The memory of CUDA graphs with captures (engine/graph_memory.h; without them:
// graph_memory_test.cpp), and the allocator's frees deferred while a stream captures. CUDA
// builds; each case is skipped without a GPU (an emulated one in CI).
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/cuda_graph.h"
#include "engine/event.h"
#include "engine/graph_memory.h"
#include "engine/tensor.h"
#include "tests/support/deadline.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif

namespace {
using brigade::Allocator;
using brigade::AllocationTrace;
using brigade::CudaGraph;
using brigade::Device;
using brigade::GraphPool;
using brigade::PoolScope;
using brigade::Shape;
using brigade::Stream;
using brigade::Tensor;

const bool graph_memory_no_gpu = brigade::cuda_device_count() == 0;

void* address_of(const Tensor& t) { return t.storage()->data(); }

// The runtime's use (pipeline/runtime/device_graphs.cpp): an eager run of three actions traced,
// then each captured in order from a pool planned by the trace, the outputs held unleased as
// the graphs hold them. A temporary of the first action serves the second's output; the first's
// output, read in place by the second and then freed, serves the third's. Replayed in order,
// each graph finds what the one before it wrote, before anything overwrites it.
TEST_CASE("captures served from a pool planned by an eager run's trace share its memory as "
          "the eager run did" * doctest::skip(graph_memory_no_gpu)) {
  brigade::testing::Deadline deadline("captures from a planned pool");
  const Stream s = Stream::create(Device::cuda(0));
  const Tensor twos = Tensor::from_vector(std::vector<float>(256, 2.0f), Shape({256}), s);
  const Tensor threes = Tensor::from_vector(std::vector<float>(256, 3.0f), Shape({256}), s);
  // Each 1024 B. first: a temporary, then its output; second: a copy of its input; third: the
  // threes.
  void* temporary_at = nullptr;
  auto first = [&] {
    Tensor temporary = Tensor::empty(Shape({256}), s);
    temporary_at = address_of(temporary);
    copy_async(temporary, twos, s);
    Tensor out = Tensor::empty(Shape({256}), s);
    copy_async(out, temporary, s);
    return out;
  };
  auto second = [&](const Tensor& in) {
    Tensor out = Tensor::empty(Shape({256}), s);
    copy_async(out, in, s);
    return out;
  };
  auto third = [&] {
    Tensor out = Tensor::empty(Shape({256}), s);
    copy_async(out, threes, s);
    return out;
  };
  // Requests: temporary [0, 2), out1 [1, 4), out2 [3, never), out3 [5, never).
  const std::shared_ptr<AllocationTrace> trace = AllocationTrace::create(s);
  {
    Tensor out1, out2, out3;
    {
      AllocationTrace::Recording recording(*trace);
      out1 = first();
    }
    {
      AllocationTrace::Recording recording(*trace);
      out2 = second(out1);
    }
    out1 = Tensor();  // its reader is done
    AllocationTrace::Recording recording(*trace);
    out3 = third();
  }
  trace->close();
  const brigade::GraphMemoryPlan plan = brigade::plan_graph_memory(trace->requests());
  CHECK(plan.request_offset == std::vector<uint64_t>{0, 1024, 0, 1024});

  GraphPool pool(s, plan);
  Tensor out1, out2, out3;  // unleased, as the graphs hold them
  Tensor leased1, leased2, leased3;  // as the capture returned them
  std::optional<CudaGraph> graph1, graph2, graph3;
  {
    PoolScope scope(pool);
    graph1 = CudaGraph::capture(s, [&] { leased1 = first(); });
  }
  CHECK(pool.holds(leased1));
  out1 = pool.unleased(leased1);
  {
    PoolScope scope(pool);
    graph2 = CudaGraph::capture(s, [&] { leased2 = second(leased1); });
  }
  out2 = pool.unleased(leased2);
  leased1 = Tensor();  // its reader is done: out1 does not hold the slot
  {
    PoolScope scope(pool);
    graph3 = CudaGraph::capture(s, [&] { leased3 = third(); });
  }
  out3 = pool.unleased(leased3);
  pool.close();
  CHECK(address_of(out2) == temporary_at);
  CHECK(address_of(out3) == address_of(out1));
  CHECK(pool.bytes() == 2048);
  CHECK_FALSE(pool.holds(twos));
  CHECK_THROWS_WITH_AS(pool.unleased(twos),
                       doctest::Contains("not one of its graph pool's tensors"), brigade::Error);
  // Replayed in order, twice: the second read the twos before the third wrote over them.
  for (int replay = 0; replay < 2; ++replay) {
    graph1->launch(s);
    graph2->launch(s);
    graph3->launch(s);
  }
  CHECK(out2.to_vector() == std::vector<float>(256, 2.0f));
  CHECK(out3.to_vector() == std::vector<float>(256, 3.0f));
}

// Another thread frees a block the capturing stream used: its events must not be recorded into
// the capture (a later query of such an event is an error), so the free waits for the capture's
// end, and then the block is back in the cache, its memory no longer in use.
TEST_CASE("a block another thread frees while its stream captures is freed after the capture" *
          doctest::skip(graph_memory_no_gpu || !Allocator::caching())) {
  brigade::testing::Deadline deadline("a free during another thread's capture");
  const Device gpu = Device::cuda(0);
  const Stream s = Stream::create(gpu), owner = Stream::create(gpu);
  Tensor shared = Tensor::zeros(Shape({1000}), owner);
  brigade::Event written;
  written.record(owner);
  s.wait(written);
  const Tensor copy = Tensor::empty(Shape({1000}), s);
  copy_async(copy, shared, s);  // s is a user of `shared`
  const uint64_t in_use_before = Allocator::of(gpu).stats().in_use;
  const void* block = address_of(shared);
  CudaGraph graph = CudaGraph::capture(s, [&] {
    std::thread other([&] { shared = Tensor(); });  // its free would record an event on s
    other.join();
    CHECK(Allocator::of(gpu).stats().in_use == in_use_before);  // not freed yet
  });
  CHECK(Allocator::of(gpu).stats().in_use < in_use_before);  // freed once the capture ended
  // The cache hands the block to its owner again, asking its events: none is the graph's.
  s.synchronize();  // its user's work done: the block goes back to its owner at once
  const Tensor again = Tensor::empty(Shape({1000}), owner);
  CHECK(address_of(again) == block);
  graph.launch(s);
  s.synchronize();
  owner.synchronize();
}

// Without the cache (BRIGADE_NO_MEMORY_CACHING=1) a block goes back to CUDA at the first
// allocation after its work is done: a cudaFree, which waits for the whole GPU, and CUDA forbids
// that while a stream of the GPU captures, whatever the thread (emulated GPUs refuse it: the
// allocation would throw). Another stage's free and allocation on the same GPU during a
// capture: the block is held back, and goes back to CUDA at the first allocation after it.
TEST_CASE("a block freed during another thread's capture on its GPU goes back to CUDA after it" *
          doctest::skip(graph_memory_no_gpu || Allocator::caching())) {
  brigade::testing::Deadline deadline("a return to CUDA during another thread's capture");
  const Device gpu = Device::cuda(0);
  const Stream s = Stream::create(gpu), other = Stream::create(gpu);
  Tensor freed = Tensor::zeros(Shape({1000}), other);
  other.synchronize();
  Allocator& allocator = Allocator::of(gpu);
  const uint64_t reserved_before = allocator.stats().reserved;
  uint64_t reserved_during = 0;
  CudaGraph graph = CudaGraph::capture(s, [&] {
    std::thread([&] {
      freed = Tensor();
      other.synchronize();  // the work its free enqueued (the emulator's poison) done: ready
      const Tensor small = Tensor::empty(Shape({10}), other);  // would give it back
      reserved_during = allocator.stats().reserved;
    }).join();
  });
  // Held back while s captured: nothing of cuda:0 went back, the small block came beside it.
  CHECK(reserved_during == reserved_before + Allocator::block_size(10 * 4));
  other.synchronize();
  const Tensor next = Tensor::empty(Shape({10}), other);
  // Given back at the first allocation after the capture (with whatever else was ready).
  CHECK(allocator.stats().reserved <= reserved_before - Allocator::block_size(1000 * 4) +
                                          Allocator::block_size(10 * 4));
  graph.launch(s);
  s.synchronize();
}

#if defined(BRIGADE_CUDA_EMULATED)
// A block its owner took back with earlier work still queued keeps that work's event, and the
// first other stream declared its user asks whether the work is done and, if not, waits for it
// (allocator.h). When that stream is recording a CUDA graph, CUDA refuses the recording thread
// the question (a query of work outside the capture) unless its capture mode is relaxed, and
// refuses the stream the wait (an event recorded outside the capture): either would lose the
// capture. The capture must hold, the host waiting instead, and each replay read what the owner
// wrote in the block's new life. The owner is held busy (emulated GPUs only) so that its earlier
// work is pending when the block is handed back; it is done by the capture in the first round,
// and is let go by another thread while the capture runs in the second.
TEST_CASE("a block handed back early, first used by a stream that records a graph: the capture "
          "holds, and replays read the block's new values" *
          doctest::skip(graph_memory_no_gpu || !Allocator::caching())) {
  brigade::testing::Deadline deadline("a block's earlier work and a capture");
  const Device gpu = Device::cuda(0);
  const Stream owner = Stream::create(gpu), s = Stream::create(gpu);
  const std::vector<float> old_values(1024, 1.0f), new_values(1024, 2.0f);
  for (const bool done_before_the_capture : {true, false}) {
    CAPTURE(done_before_the_capture);
    Tensor x = Tensor::from_vector(old_values, Shape({1024}), owner);
    owner.synchronize();
    void* const memory = address_of(x);
    const Tensor seen = Tensor::empty(Shape({1024}), owner);
    const Tensor fresh = Tensor::from_vector(new_values, Shape({1024}), owner);
    auto hold = std::make_unique<brigade::emu::gpu::StreamHold>(owner.cuda_handle());
    copy_async(seen, x, owner);  // the owner's earlier work: a read of x, held back
    x = Tensor();
    const Tensor reused = Tensor::empty(Shape({1024}), owner);
    REQUIRE(address_of(reused) == memory);  // taken back at once by its owner, work pending
    copy_async(reused, fresh, owner);
    brigade::Event written;
    written.record(owner);
    s.wait(written);  // the replays read the new values: ordered after them on s
    if (done_before_the_capture) {
      hold->release();
      owner.synchronize();
    }
    const Tensor out = Tensor::empty(Shape({1024}), s);
    CudaGraph graph = CudaGraph::capture(s, [&] {
      const std::jthread let_go([&] { hold->release(); });  // whenever: the host waits for it
      copy_async(out, reused, s);  // s's first use of `reused`: record_stream asks, then waits
    });
    graph.launch(s);
    CHECK(out.to_vector() == new_values);
    CHECK(seen.to_vector() == old_values);  // the earlier read, before the new values
    owner.synchronize();
    s.synchronize();
  }
}
#endif

}  // namespace

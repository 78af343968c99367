// The allocator's side of CUDA graphs (engine/allocator.h): AllocationLog, CaptureReserve,
// GraphPool, and the frees deferred while a stream captures. CUDA builds; each case is
// skipped without a GPU (an emulated one in CI).
#include <doctest/doctest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/cuda_graph.h"
#include "engine/event.h"
#include "engine/tensor.h"
#include "tests/support/deadline.h"

namespace {
using brigade::Allocator;
using brigade::AllocationLog;
using brigade::CaptureReserve;
using brigade::CudaGraph;
using brigade::Device;
using brigade::GraphPool;
using brigade::Shape;
using brigade::Stream;
using brigade::Tensor;

const bool graph_memory_no_gpu = brigade::cuda_device_count() == 0;

void* address_of(const Tensor& t) { return t.storage()->data(); }

TEST_CASE("an allocation log gives the blocks its stream's work needs at once, no other's" *
          doctest::skip(graph_memory_no_gpu)) {
  brigade::testing::Deadline deadline("allocation log");
  const Stream s = Stream::create(Device::cuda(0)), other = Stream::create(Device::cuda(0));
  const Tensor before = Tensor::empty(Shape({10}), s);  // not the log's
  AllocationLog log(s);
  Tensor a = Tensor::empty(Shape({10}), s);
  const Tensor b = Tensor::empty(Shape({10}), other);  // another stream's
  const Tensor c = Tensor::empty(Shape({3, 5}), s);
  a = Tensor();                                   // freed: serves the next request of 40 bytes
  const Tensor d = Tensor::empty(Shape({10}), s);
  const Tensor e = Tensor::empty(Shape({10}), s);  // two of 40 bytes live at once
  CHECK(log.requests() == std::vector<uint64_t>{40, 40, 60});
}

TEST_CASE("a capture is served the blocks reserved for it; a pool hands a block freed earlier in "
          "the sequence to a later request of its size, not one another stream used, and none "
          "once closed" * doctest::skip(graph_memory_no_gpu)) {
  brigade::testing::Deadline deadline("capture reserve and graph pool");
  const Stream s = Stream::create(Device::cuda(0)), other = Stream::create(Device::cuda(0));
  const Tensor source = Tensor::zeros(Shape({256}), s);
  GraphPool pool(s);
  Tensor kept;               // a capture's output: stays its graph's
  void* freed = nullptr;     // a capture's temporary, freed in the capture
  void* sent = nullptr;      // one another stream copied from
  Tensor sent_tensor;
  {
    CaptureReserve reserve({1024, 1024, 512}, pool);
    CudaGraph::capture(s, [&] {
      kept = Tensor::empty(Shape({256}), s);  // 1024 bytes
      copy_async(kept, source, s);
      Tensor temporary = Tensor::empty(Shape({256}), s);
      copy_async(temporary, source, s);
      freed = address_of(temporary);
      sent_tensor = Tensor::empty(Shape({128}), s);  // 512 bytes
      copy_async(sent_tensor, 0, source, 0, 128, s);
      sent = address_of(sent_tensor);
    });
  }
  // The freed temporary serves the next capture's request of its size, in place of a new
  // block; an output still held does not.
  {
    CaptureReserve reserve({1024, 512}, pool);
    CudaGraph::capture(s, [&] {
      const Tensor again = Tensor::empty(Shape({256}), s);
      CHECK(address_of(again) == freed);
      CHECK(address_of(again) != address_of(kept));
      copy_async(again, source, s);
      // A request the sizing run did not make is refused, naming the stream and the size.
      CHECK_THROWS_WITH_AS(Tensor::empty(Shape({1000}), s),
                           doctest::Contains("asked for 3.9 KiB that the eager run"),
                           brigade::Error);
    });
  }
  // A block another stream copied from is not handed out again: the reuse would need that
  // stream's event, which a graph cannot wait for.
  const Tensor host_copy = Tensor::empty(Shape({128}), other);
  copy_async(host_copy, sent_tensor, other);
  sent_tensor = Tensor();
  {
    CaptureReserve reserve({512}, pool);
    CudaGraph::capture(s, [&] {
      const Tensor next = Tensor::empty(Shape({128}), s);
      CHECK(address_of(next) != sent);
    });
  }
  // Closed: what is freed now is never handed out again.
  kept = Tensor();
  pool.close();
  {
    CaptureReserve reserve({1024}, pool);
    void* served = nullptr;
    CudaGraph::capture(s, [&] { served = address_of(Tensor::empty(Shape({256}), s)); });
    CHECK(served != freed);
  }
  s.synchronize();
  other.synchronize();
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

}  // namespace

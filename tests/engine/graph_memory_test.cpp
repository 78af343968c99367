// The memory of CUDA graphs (engine/graph_memory.h): the plan, the trace it is made from, and
// the pool that serves it. None of them needs a GPU to run (a capture does:
// cuda_graph_memory_test.cpp), so they are tested on CPU devices, in every build.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "engine/graph_memory.h"
#include "engine/tensor.h"
#include "engine/allocator.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

namespace {
using brigade::AllocationTrace;
using brigade::Device;
using brigade::GraphMemoryPlan;
using brigade::GraphPool;
using brigade::PoolScope;
using brigade::Shape;
using brigade::Stream;
using brigade::Tensor;
using brigade::TracedRequest;

constexpr uint64_t kNever = TracedRequest::kNever;

void* address_of(const Tensor& t) { return t.storage()->data(); }
Tensor floats(int64_t n, const Stream& s) { return Tensor::empty(Shape({n}), s); }

// A sequence worked by hand (positions count requests and frees together):
//   r0 1024 B, asked 0, freed 3      r1  512 B, asked 1, freed 2
//   r2 2048 B, asked 4, freed 6      r3 1024 B, asked 5, never freed
//   r4  256 B, asked 7, freed 8
// Largest first: r2 at 0, alone; r0 lives beside no placed request, so at 0 too; r3 overlaps
// r2 in time, so after it, at 2048; r1 overlaps r0, so after it, at 1024; r4 overlaps only r3,
// and the gap before r3 holds it: at 0. 3 KiB, what r2 and r3 hold at once; one block per
// distinct size would hold 3.75 KiB, and one per request 4.75.
const std::vector<TracedRequest> kSequence{
    {1024, 0, 3}, {512, 1, 2}, {2048, 4, 6}, {1024, 5, kNever}, {256, 7, 8}};

TEST_CASE("a graph's memory plan places requests whose lives overlap on bytes of their own") {
  const GraphMemoryPlan plan = brigade::plan_graph_memory(kSequence);
  CHECK(plan.request_offset == std::vector<uint64_t>{0, 1024, 0, 2048, 0});
  CHECK(plan.request_bytes == std::vector<uint64_t>{1024, 512, 2048, 1024, 256});
  CHECK(plan.bytes() == 3072);
  // Two requests that live at once fit where a larger one lived before them: 2 KiB, where
  // blocks shared whole (each as large as its largest request) would take 3 (2048 + 1024).
  const GraphMemoryPlan inside =
      brigade::plan_graph_memory({{2048, 0, 1}, {1024, 2, 5}, {1024, 3, 6}});
  CHECK(inside.request_offset == std::vector<uint64_t>{0, 0, 1024});
  CHECK(inside.bytes() == 2048);
  // Of two gaps that hold it, the smaller. By size: r2 (1024 B, [2, 4)) at 0; r4 (768 B,
  // alive throughout) after it, at 1024; r0 ([3, 5)) overlaps both: after them, at 1792; r1
  // ([3, 6)) overlaps all three: at 2048; r3 ([5, 6)) overlaps only r4 and r1, leaving two gaps:
  // 0-1023 (r2's, dead by then) and 1792-2047 (r0's): the smaller, at 1792.
  const GraphMemoryPlan best_fit = brigade::plan_graph_memory(
      {{256, 3, 5}, {256, 3, 6}, {1024, 2, 4}, {256, 5, 6}, {768, 0, 7}});
  CHECK(best_fit.request_offset == std::vector<uint64_t>{1792, 2048, 0, 1792, 1024});
  CHECK(best_fit.bytes() == 2304);
  // Lives that touch (one freed where the next is asked) share; each range is a whole number
  // of 256 B, so that every tensor starts aligned; none of an empty sequence.
  CHECK(brigade::plan_graph_memory({{64, 0, 1}, {64, 1, 2}}).request_offset ==
        std::vector<uint64_t>{0, 0});
  CHECK(brigade::plan_graph_memory({{100, 0, 2}, {300, 1, 3}}).request_offset ==
        std::vector<uint64_t>{512, 0});
  CHECK(brigade::plan_graph_memory({}).bytes() == 0);
}

TEST_CASE("an allocation trace records its stream's requests while recording, and their frees "
          "on its thread until closed, not one another stream used") {
  brigade::testing::Deadline deadline("allocation trace");
  const Stream s = Stream::create(Device::cpu(40)), other = Stream::create(Device::cpu(40));
  const std::shared_ptr<AllocationTrace> trace = AllocationTrace::create(s);
  Tensor before = floats(10, s);  // not recorded
  Tensor a, c, d, held, sent;
  {
    AllocationTrace::Recording recording(*trace);
    a = floats(10, s);                      // r0: 40 B, asked at 0
    const Tensor elsewhere = floats(10, other);  // another stream's: not recorded
    c = floats(15, s);                      // r1: 60 B, asked at 1
    a = Tensor();                           // r0 freed at 2
    d = floats(10, s);                      // r2: 40 B, asked at 3
    held = floats(4, s);                    // r3: 16 B, asked at 4
    sent = floats(8, s);                    // r4: 32 B, asked at 5
  }
  before = Tensor();  // not one of its requests
  sent.storage()->record_stream(other);
  sent = Tensor();                             // another stream used it: never reused
  std::thread([&] { c = Tensor(); }).join();   // another thread's free: no point of the sequence
  d = Tensor();                                // freed between recordings: r2 freed at 6
  const Tensor after = floats(10, s);          // not recording: not a request
  trace->close();
  held = Tensor();                             // after the close: not the sequence's
  CHECK(trace->requests() == std::vector<TracedRequest>{
                                 {40, 0, 2}, {60, 1, kNever}, {40, 3, 6}, {16, 4, kNever},
                                 {32, 5, kNever}});
  // A recording is one thread's, one at a time.
  AllocationTrace::Recording recording(*trace);
  CHECK_THROWS_WITH_AS(AllocationTrace::Recording{*trace},
                       doctest::Contains("inside another recording"), brigade::Error);
}

TEST_CASE("a graph pool serves each request at the offset its plan gave it, bytes once their "
          "tensor is freed (not one held unleased), the smallest gap that holds a request when "
          "the sequence strays, and else refuses") {
  brigade::testing::Deadline deadline("graph pool");
  const Stream s = Stream::create(Device::cpu(41)), other = Stream::create(Device::cpu(41));
  GraphPool pool(s, brigade::plan_graph_memory(kSequence));
  CHECK(pool.bytes() == 3072);
  Tensor r3;
  {
    PoolScope scope(pool);
    Tensor r0 = floats(256, s);  // 1024 B
    Tensor r1 = floats(128, s);  // 512 B
    auto* const arena = static_cast<char*>(address_of(r0));
    CHECK(address_of(r1) == arena + 1024);
    const Tensor ordinary = floats(256, other);  // another stream's: from the allocator
    CHECK_FALSE(pool.holds(ordinary));
    r1 = Tensor();
    r0 = Tensor();
    Tensor r2 = floats(512, s);  // 2048 B, over r0's and r1's bytes
    CHECK(address_of(r2) == arena);
    r3 = floats(256, s);  // after r2, never freed
    CHECK(address_of(r3) == arena + 2048);
    r2 = Tensor();
    const Tensor r4 = floats(64, s);  // 256 B, at the start again
    CHECK(address_of(r4) == arena);
    // Past the plan (or not as it planned): the smallest gap that holds it...
    r3 = Tensor();
    const Tensor stray = floats(200, s);  // 800 B: after r4, the one gap
    CHECK(address_of(stray) == arena + 256);
    const Tensor small = floats(10, s);  // 40 B, in the 1792 B left after the stray
    CHECK(address_of(small) == arena + 1280);
    // ...and none: refused, naming the stream and the size.
    CHECK_THROWS_WITH_AS(floats(400, s), doctest::Contains("asked for 1.6 KiB more than the eager"),
                         brigade::Error);
  }
  // A tensor held unleased (as a graph holds what it hands out again) keeps the memory, not
  // the bytes: once the tensor it was served as is freed, they serve the next request.
  {
    GraphPool fourth(s, brigade::plan_graph_memory({{64, 0, 1}, {64, 2, 3}}));
    PoolScope scope(fourth);
    Tensor served = floats(16, s);
    CHECK(fourth.holds(served));
    const Tensor unleased = fourth.unleased(served);
    CHECK(address_of(unleased) == address_of(served));
    CHECK(unleased.storage() == served.storage());  // the same block, another owner
    served = Tensor();
    const Tensor next = floats(16, s);
    CHECK(address_of(next) == address_of(unleased));
    CHECK_FALSE(fourth.unleased(next).storage() == unleased.storage());  // a range of its own
    const Tensor ordinary = floats(16, other);
    CHECK_FALSE(fourth.holds(ordinary));
    CHECK_FALSE(fourth.holds(Tensor()));
    CHECK_THROWS_WITH_AS(fourth.unleased(ordinary),
                         doctest::Contains("not one of its graph pool's tensors"), brigade::Error);
  }
  // Bytes another stream used are not taken back; once closed, none are.
  {
    GraphPool second(s, brigade::plan_graph_memory({{64, 0, 1}, {64, 2, 3}, {64, 4, 5}}));
    PoolScope scope(second);
    Tensor first = floats(16, s);
    first.storage()->record_stream(other);
    first = Tensor();
    CHECK_THROWS_AS(floats(16, s), brigade::Error);  // its one range is still the copy's
  }
  {
    GraphPool third(s, brigade::plan_graph_memory({{64, 0, 1}, {64, 2, 3}}));
    PoolScope scope(third);
    Tensor first = floats(16, s);
    third.close();
    first = Tensor();
    CHECK_THROWS_AS(floats(16, s), brigade::Error);
  }
  // A tensor may outlive its pool: it keeps the arena.
  Tensor outlives;
  {
    GraphPool fifth(s, brigade::plan_graph_memory({{64, 0, 1}}));
    PoolScope scope(fifth);
    outlives = Tensor::zeros(Shape({16}), s);
  }
  CHECK(outlives.to_vector() == std::vector<float>(16, 0.0f));
  s.synchronize();
  other.synchronize();
}

TEST_CASE("an arena whose bytes another stream used goes back to the allocator only for reuse "
          "after that stream's work, though the range it used went first" *
          doctest::skip(!brigade::Allocator::caching())) {
  brigade::testing::Deadline deadline("graph pool's arena, another stream's use");
  const Device dev = Device::cpu(43);
  const Stream s = Stream::create(dev), other = Stream::create(dev);
  brigade::testing::Gate gate;
  other.enqueue(gate.blocker());  // `other` is provably busy: its use below is still queued
  void* arena = nullptr;
  {
    GraphPool pool(s, brigade::plan_graph_memory({{1024, 0, 1}}));
    PoolScope scope(pool);
    Tensor sent = floats(256, s);  // 1024 B: the whole arena
    arena = address_of(sent);
    sent.storage()->record_stream(other);  // a copy from it, queued on `other`
  }  // the tensor, its range and the pool go; the arena with them
  s.synchronize();
  brigade::Allocator& allocator = brigade::Allocator::of(dev);
  const std::shared_ptr<brigade::Block> mine = allocator.allocate_exact(1024, s);
  CHECK(mine->data() != arena);  // `other` may still read the arena: not even its owner's yet
  gate.open();
  other.synchronize();
  const std::shared_ptr<brigade::Block> later = allocator.allocate_exact(1024, s);
  CHECK(later->data() == arena);  // once its work is done
}

}  // namespace

// Allocator: bins, reuse, stream-safe reuse across streams (pytorch#23729), out of memory.
// Each test uses its own CPU device index: allocators and their counters are per device.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>

#include "engine/allocator.h"
#include "tests/support/allocation_probe.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"
#include "tests/support/error_text.h"
#include "tests/support/stream_probe.h"

using brigade::Allocator;
using brigade::Device;
using brigade::Event;
using brigade::Stream;
using brigade::testing::Deadline;
using brigade::testing::Gate;

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;
// The cases about reuse need the cache: BRIGADE_NO_MEMORY_CACHING=1 turns it off.
const bool caching = Allocator::caching();

TEST_CASE("sizes round up into bins: 512 B steps to 2 KiB, then four bins per power of two") {
  CHECK(Allocator::round_size(0) == 512);
  CHECK(Allocator::round_size(1) == 512);
  CHECK(Allocator::round_size(512) == 512);
  CHECK(Allocator::round_size(513) == 1024);
  CHECK(Allocator::round_size(2048) == 2048);
  CHECK(Allocator::round_size(2049) == 2560);   // 2 KiB + 512
  CHECK(Allocator::round_size(4096) == 4096);
  CHECK(Allocator::round_size(4097) == 5120);   // 4 KiB + 1 KiB
  CHECK(Allocator::round_size(64 * MiB) == 64 * MiB);
  CHECK(Allocator::round_size(65 * MiB) == 80 * MiB);  // 64 MiB + 16 MiB
  for (uint64_t n = 1; n < 100000; n = n * 3 + 1) {
    const uint64_t bin = Allocator::round_size(n);
    CHECK(bin >= n);
    CHECK(bin * 4 <= n * 5 + 4 * 512);  // at most 25% slack above the 512 B floor
    CHECK(Allocator::round_size(bin) == bin);
  }
}

TEST_CASE("an exact allocation rounds to 512 B, not to its bin, and is cached under that size" *
          doctest::skip(!caching)) {
  Deadline deadline("exact allocation");
  const Device dev = Device::cpu(27);
  Allocator& alloc = Allocator::of(dev);
  Stream s = Stream::create(dev);
  auto exact = alloc.allocate_exact(4500, s);
  CHECK(exact->size() == 4608);                       // 9 x 512
  CHECK(Allocator::block_size(4500) == 5120);         // its bin: 4 KiB + 1 KiB
  CHECK(alloc.stats().in_use == 4608);
  void* memory = exact->data();
  exact.reset();
  auto binned = alloc.allocate(4500, s);              // the bin's size: not the cached block
  CHECK(binned->data() != memory);
  auto again = alloc.allocate_exact(4200, s);         // 4608 again: the cached block
  CHECK(again->data() == memory);
}

TEST_CASE("a freed block is reused by its own stream, and counters follow" * doctest::skip(!caching)) {
  Deadline deadline("own-stream reuse");
  const Device dev = Device::cpu(20);
  Allocator& alloc = Allocator::of(dev);
  Stream s = Stream::create(dev);
  auto a = alloc.allocate(1000, s);
  CHECK(a->size() == 1024);
  CHECK(reinterpret_cast<uintptr_t>(a->data()) % 64 == 0);
  void* first = a->data();
  CHECK(alloc.stats().in_use == 1024);
  a.reset();
  CHECK(alloc.stats().in_use == 0);
  CHECK(alloc.stats().reserved == 1024);
  auto b = alloc.allocate(900, s);  // same bin, same stream: the same memory, at once
  CHECK(b->data() == first);
  CHECK(alloc.stats().reserved == 1024);
  CHECK(alloc.stats().peak_in_use == 1024);
  b.reset();
  s.synchronize();
  alloc.empty_cache();
  CHECK(alloc.stats().reserved == 0);
}

TEST_CASE("a block still used by another stream is not handed to a third before that work is done" * doctest::skip(!caching)) {
  Deadline deadline("stream-safe reuse");
  const Device dev = Device::cpu(21);
  Allocator& alloc = Allocator::of(dev);
  Stream owner = Stream::create(dev), user = Stream::create(dev), third = Stream::create(dev);
  Gate gate;
  auto block = alloc.allocate(4096, owner);
  void* memory = block->data();
  user.enqueue(gate.blocker());  // the user stream is provably busy...
  block->record_stream(user);    // ...with work that (we declare) uses the block
  owner.synchronize();
  block.reset();                 // freed while `user` may still read it

  auto other = alloc.allocate(4096, third);
  CHECK(other->data() != memory);  // not handed to a third stream
  auto own = alloc.allocate(4096, owner);
  CHECK(own->data() != memory);    // not even to its owner: the user is not done

  gate.open();
  user.synchronize();
  owner.synchronize();
  auto again = alloc.allocate(4096, third);
  CHECK(again->data() == memory);  // once every user is done, anyone may have it
}

TEST_CASE("a block freed with owner work pending goes to its owner at once, to others later" * doctest::skip(!caching)) {
  Deadline deadline("owner ordering");
  const Device dev = Device::cpu(22);
  Allocator& alloc = Allocator::of(dev);
  Stream owner = Stream::create(dev), other = Stream::create(dev);
  Gate gate;
  owner.enqueue(gate.blocker());  // the owner's earlier work may still use the block
  auto block = alloc.allocate(10000, owner);
  void* memory = block->data();
  block.reset();
  auto elsewhere = alloc.allocate(10000, other);
  CHECK(elsewhere->data() != memory);
  auto mine = alloc.allocate(10000, owner);  // ordered after that work by the FIFO
  CHECK(mine->data() == memory);
  gate.open();
  owner.synchronize();
}

// The owner takes a block back before its earlier work on it has run (the case above); then
// another stream is declared to write it (a GPU staging buffer filled by a host stream, a
// receive buffer filled by the sender's copy). That write must wait for the owner's earlier
// work, which still reads the old contents.
TEST_CASE("a block the owner took back early is written by another stream only after the owner's work" * doctest::skip(!caching)) {
  Deadline deadline("owner's early reuse, another writer");
  const Device dev = Device::cpu(25);
  Allocator& alloc = Allocator::of(dev);
  Stream owner = Stream::create(dev), writer = Stream::create(dev);
  Gate gate;
  auto block = alloc.allocate(4096, owner);
  float* memory = static_cast<float*>(block->data());
  memory[0] = 1;  // nothing is enqueued yet: the host may write it
  float read = 0;
  owner.enqueue(gate.blocker());
  owner.enqueue([memory, &read] { read = memory[0]; });  // the owner's earlier work reads it
  block.reset();
  auto again = alloc.allocate(4096, owner);
  REQUIRE(again->data() == memory);  // the owner's FIFO orders its own reuse
  again->record_stream(writer);      // declared before the writer's work, as copy_async does
  writer.enqueue([memory] { memory[0] = 2; });
  Event written;
  written.record(writer);
  const bool wrote_before_the_owner_read = brigade::testing::finishes_or_blocks(writer, written);
  gate.open();
  owner.synchronize();
  writer.synchronize();
  CHECK_FALSE(wrote_before_the_owner_read);
  CHECK(read == 1);
  CHECK(memory[0] == 2);
}

// BRIGADE_NO_MEMORY_CACHING=1 (CI runs the engine suite both ways): a block exactly as asked,
// never handed to another tensor, its memory back to the system once its work is done.
TEST_CASE("without caching a block is exactly as asked and goes back once its work is done" *
          doctest::skip(caching)) {
  Deadline deadline("no caching");
  const Device dev = Device::cpu(26);
  Allocator& alloc = Allocator::of(dev);
  Stream s = Stream::create(dev);
  auto a = alloc.allocate(1000, s);
  CHECK(a->size() == 1000);
  CHECK(Allocator::block_size(0) == 1);
  CHECK(alloc.stats().reserved == 1000);
  Gate gate;  // holds the stream: the block's work is still in flight when it is freed
  s.enqueue(gate.blocker());
  a.reset();
  CHECK(alloc.stats().in_use == 0);
  CHECK(alloc.stats().reserved == 1000);  // kept until its stream is past the work
  auto b = alloc.allocate(1000, s);       // a new block: the old one is not reused
  CHECK(alloc.stats().reserved == 2000);
  gate.open();
  s.synchronize();
  CHECK(alloc.stats().reserved == 2000);  // nothing has asked since: the old block waits
  b.reset();
  s.synchronize();
  auto c = alloc.allocate(10, s);  // frees every block whose work is done: both are gone
  CHECK(alloc.stats().reserved == 10);
}

TEST_CASE("going over a device's capacity throws an error naming device, request and usage") {
  Deadline deadline("out of memory");
  const int index = 23;
  brigade::configure_cpu_device(index, {1, 256 * MiB});
  const Device dev = Device::cpu(index);
  Allocator& alloc = Allocator::of(dev);
  Stream s = Stream::create(dev), busy = Stream::create(dev);
  Gate gate;
  auto a = alloc.allocate(128 * MiB, s);
  auto b = alloc.allocate(64 * MiB, s);
  busy.enqueue(gate.blocker());
  auto c = alloc.allocate(16 * MiB, busy);
  c.reset();  // cached, but its stream is still busy: it cannot be released to make room
  // in use 128 + 64 = 192 MiB, reserved 192 + 16 = 208 MiB; 208 + 96 > 256.
  CHECK_THROWS_WITH_AS(alloc.allocate(96 * MiB, s),
                       "cpu:23: out of memory allocating 96.0 MiB (in use 192.0 MiB, reserved "
                       "208.0 MiB, capacity 256.0 MiB)",
                       brigade::OutOfMemoryError);
  gate.open();
  busy.synchronize();
  // Now the cached 16 MiB block is released to make room: 192 + 64 = 256 fits exactly.
  auto d = alloc.allocate(64 * MiB, s);
  CHECK(alloc.stats().reserved == 256 * MiB);
  CHECK(alloc.stats().in_use == 256 * MiB);
  CHECK(alloc.stats().capacity == 256 * MiB);
}

// A CPU device of 1 MiB (cpu:index): `live` held on `other`, and 768 KiB `freed` on `user`,
// whose work waits behind `gate` — once the test resets `freed`, memory about to be free until
// the gate opens.
struct FreedBehindGate {
  FreedBehindGate(int index, uint64_t live_bytes)
      : dev((brigade::configure_cpu_device(index, {1, 1 * MiB}), Device::cpu(index))),
        alloc(Allocator::of(dev)) {
    if (live_bytes > 0) live = alloc.allocate(live_bytes, other);
    freed = alloc.allocate(768 * KiB, user);
    user.enqueue(gate.blocker());
  }
  const Device dev;
  Allocator& alloc;
  Stream user = Stream::create(dev), other = Stream::create(dev);
  std::shared_ptr<brigade::Block> live, freed;
  Gate gate;
};

// Memory freed by the host while queued work still uses it is memory about to be free: an
// allocation that fits once that work has run waits for it instead of reporting out of memory
// (with the cache or without: either way the block is held until its work is done).
TEST_CASE("an allocation that fits once freed blocks' queued work has run waits for it; one "
          "that can never fit fails at once") {
  Deadline deadline("out of memory while memory is about to be freed");
  FreedBehindGate memory(27, 256 * KiB);
  auto& [dev, alloc, user, other, live, freed, gate] = memory;
  bool used = false;
  user.enqueue([memory = static_cast<char*>(freed->data()), &used] {  // queued behind the gate
    memory[0] = 1;
    used = true;
  });
  freed.reset();  // by the host, while that task still waits to use it
  CHECK(alloc.stats().in_use == 256 * KiB);
  CHECK(alloc.stats().reserved == 1 * MiB);

  // 256 KiB live + 1 MiB > 1 MiB whatever the queued work does: no wait, the error at once.
  const uint64_t waits_before = alloc.stats().waits_for_pending;
  CHECK_THROWS_WITH_AS(alloc.allocate(1 * MiB, other),
                       "cpu:27: out of memory allocating 1.0 MiB (in use 256.0 KiB, reserved "
                       "1.0 MiB, capacity 1.0 MiB)",
                       brigade::OutOfMemoryError);
  CHECK(alloc.stats().waits_for_pending == waits_before);

  // 256 + 768 KiB fits once the task has run: the allocation blocks until then.
  auto pending = std::async(std::launch::async, [&alloc = alloc, &other = other] {
    return alloc.allocate(768 * KiB, other);
  });
  CHECK(brigade::testing::allocation_waits(alloc, waits_before, pending));
  gate.open();
  auto block = pending.get();
  CHECK(used);  // the task that used the freed block ran before its memory was given again
  CHECK(block->size() == Allocator::block_size(768 * KiB));
  CHECK(alloc.stats().in_use == 1 * MiB);
  CHECK(alloc.stats().waits_for_pending == waits_before + 1);
}

// Queued work that cannot run while the allocation waits (two GPU ranks both full, each
// waiting on an NCCL send its peer must match; here a task behind a gate the test opens only
// afterwards) once made the allocation wait for ever. It waits BRIGADE_ALLOC_WAIT_S, then
// fails as out of memory, saying it waited and what is still pending; the freed block stays
// cached, and is given once its work has run.
TEST_CASE("an allocation whose freed blocks' queued work does not run fails after its wait") {
  Deadline deadline("a wait for queued work that does not run", std::chrono::seconds(30));
  FreedBehindGate memory(29, 256 * KiB);
  auto& [dev, alloc, user, other, live, freed, gate] = memory;
  freed.reset();  // its owner's work, behind the gate, is still queued
  const uint64_t waits_before = alloc.stats().waits_for_pending;
  ::setenv("BRIGADE_ALLOC_WAIT_S", "0.2", 1);
  const std::string refused = brigade::testing::error_text<brigade::OutOfMemoryError>(
      [&alloc = alloc, &other = other] { alloc.allocate(768 * KiB, other); });
  ::unsetenv("BRIGADE_ALLOC_WAIT_S");
  CHECK(refused.starts_with(
      "cpu:29: out of memory allocating 768.0 KiB (in use 256.0 KiB, reserved 1.0 MiB, capacity "
      "1.0 MiB); waited 0.2 s (BRIGADE_ALLOC_WAIT_S) for queued work that did not free enough: "
      "still pending at " + user.str() + ", position "));
  CHECK(alloc.stats().waits_for_pending == waits_before + 1);
  CHECK(alloc.stats().reserved == 1 * MiB);  // the block is still cached
  gate.open();
  user.synchronize();
  CHECK(alloc.allocate(768 * KiB, other)->size() == Allocator::block_size(768 * KiB));
}

// A malformed BRIGADE_ALLOC_WAIT_S is refused by its name when a wait would read it.
TEST_CASE("BRIGADE_ALLOC_WAIT_S that is no number of seconds is refused by its name") {
  FreedBehindGate memory(30, 0);
  auto& [dev, alloc, user, other, live, freed, gate] = memory;
  freed.reset();
  ::setenv("BRIGADE_ALLOC_WAIT_S", "soon", 1);
  const std::string refused = brigade::testing::error_text<brigade::Error>(
      [&alloc = alloc, &other = other] { alloc.allocate(768 * KiB, other); });
  ::unsetenv("BRIGADE_ALLOC_WAIT_S");
  gate.open();
  user.synchronize();
  CHECK(refused.find("BRIGADE_ALLOC_WAIT_S=\"soon\": expected a number of seconds above 0") !=
        std::string::npos);
}

// A task of a CPU stream that would have to wait is refused, not left to wait: the work it would
// wait for may be its own, or queued behind it on its stream (a deadlock).
TEST_CASE("an allocation inside a stream's task does not wait for queued work: it says why") {
  Deadline deadline("no wait inside stream work");
  const int index = 28;
  brigade::configure_cpu_device(index, {1, 1 * MiB});
  const Device dev = Device::cpu(index);
  Allocator& alloc = Allocator::of(dev);
  Stream user = Stream::create(dev), worker = Stream::create(dev);
  Gate gate;
  auto freed = alloc.allocate(768 * KiB, user);
  user.enqueue(gate.blocker());
  freed.reset();  // its work (the owner's, behind the gate) is still queued
  std::string refused;
  worker.enqueue([&] {
    refused = brigade::testing::error_text<brigade::OutOfMemoryError>(
        [&] { alloc.allocate(768 * KiB, worker); });
  });
  worker.synchronize();
  gate.open();
  user.synchronize();
  CHECK(refused == "cpu:28: out of memory allocating 768.0 KiB (in use 0 B, reserved 768.0 KiB, "
                   "capacity 1.0 MiB); 768.0 KiB of freed blocks wait for queued work, which a "
                   "task of " + worker.str() + " cannot wait for: it may be that work or queued "
                   "behind it; allocate on the host before enqueuing the task");
  CHECK(alloc.allocate(768 * KiB, worker)->size() == Allocator::block_size(768 * KiB));
}

TEST_CASE("an allocation for another device's stream is refused") {
  Stream s = Stream::create(Device::cpu(0));
  CHECK_THROWS_WITH_AS(Allocator::of(Device::cpu(24)).allocate(16, s),
                       ("cpu:24: allocation for " + s.str() + ", a stream of another device").c_str(),
                       brigade::Error);
}

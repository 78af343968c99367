// The CUDA backend on a real GPU: streams, events, allocator, copies. Compiled in CUDA
// builds; each case is skipped (and says so in doctest's count) on a machine without GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/event.h"
#include "engine/tensor.h"
#include "tests/support/allocation_probe.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"
#include "tests/support/stream_probe.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif

using brigade::copy_async;
using brigade::Device;
using brigade::Event;
using brigade::Stream;
using brigade::Tensor;
using brigade::testing::Deadline;
using brigade::testing::Gate;

static const bool no_gpu = brigade::cuda_device_count() == 0;

static std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_CASE("H2D, D2D and D2H copies on a CUDA stream round-trip" * doctest::skip(no_gpu)) {
  Deadline deadline("cuda round trip");
  Stream s = Stream::create(Device::cuda(0));
  const auto values = iota(1000, -3.0f);
  Tensor a = Tensor::from_vector(values, {10, 100}, s);
  Tensor b = Tensor::empty({10, 100}, s);
  copy_async(b, a, s);
  CHECK(b.to_vector() == values);
  Tensor z = Tensor::zeros({7}, s);
  CHECK(z.to_vector() == std::vector<float>(7, 0.0f));
}

// A GPU older than the build's kernels is refused at its first stream, by name, not at the
// first launch deep in a layer (cudaErrorNoKernelImageForDevice). On emulated GPUs the meson
// test "engine GPU of compute capability 7.5" runs this case on GPUs that say 7.5.
TEST_CASE("a GPU the build has no kernels for is refused at its first stream" *
          doctest::skip(no_gpu)) {
  int major = 0, minor = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess);
  MESSAGE("cuda:0 has compute capability " << major << "." << minor);
  if (major >= 8) {  // every GPU that runs Brigade's kernels (the build refuses older archs)
    CHECK_NOTHROW(Stream::create(Device::cuda(0)));
    return;
  }
  const std::string expected = "device cuda:0 has compute capability " + std::to_string(major) +
                               "." + std::to_string(minor) +
                               "; Brigade's CUDA kernels need 8.0 or later (bf16 tensor-core "
                               "instructions)";
  CHECK_THROWS_WITH_AS(Stream::create(Device::cuda(0)), expected.c_str(), brigade::Error);
  CHECK_THROWS_WITH_AS(Tensor::zeros({4}, Device::cuda(0)), expected.c_str(), brigade::Error);
}

TEST_CASE("a host task on a CUDA stream is an error, not a fallback" * doctest::skip(no_gpu)) {
  Stream s = Stream::create(Device::cuda(0));
  CHECK_THROWS_WITH_AS(s.enqueue([] {}),
                       (s.str() + ": enqueue(host task) on a CUDA stream; launch CUDA work on "
                                  "cuda_handle() instead (there is no CPU fallback)").c_str(),
                       brigade::Error);
}

TEST_CASE("CUDA events: completion and ordered elapsed time" * doctest::skip(no_gpu)) {
  Deadline deadline("cuda events");
  Stream s = Stream::create(Device::cuda(0));
  Tensor big = Tensor::zeros({64, 1024, 1024}, s);  // some work between the events
  Event a = Event::timed(), b = Event::timed(), c = Event::timed();
  a.record(s);
  copy_async(Tensor::empty({64, 1024, 1024}, s), big, s);
  b.record(s);
  copy_async(Tensor::empty({64, 1024, 1024}, s), big, s);
  c.record(s);
  c.synchronize();
  CHECK(a.query());
  CHECK(brigade::elapsed_ms(a, b) >= 0);
  CHECK(brigade::elapsed_ms(a, b) <= brigade::elapsed_ms(a, c));
}

TEST_CASE("a CPU stream and a CUDA stream order each other through events" * doctest::skip(no_gpu)) {
  Deadline deadline("cpu <-> cuda waits");
  Stream cpu = Stream::create(Device::cpu(0));
  Stream gpu = Stream::create(Device::cuda(0));
  Tensor host = Tensor::empty({256}, cpu);
  Tensor device = Tensor::empty({256}, gpu);
  Gate gate;
  cpu.enqueue(gate.blocker());
  cpu.enqueue([p = host.data<float>()] { for (int i = 0; i < 256; ++i) p[i] = 2.0f * i; });
  Event written;
  written.record(cpu);
  // The CUDA stream's wait blocks its caller until the CPU work is done: another thread.
  std::thread issuer([&] {
    gpu.wait(written);
    copy_async(device, host, gpu);
  });
  gate.open();
  issuer.join();
  Event copied;
  copied.record(gpu);
  Tensor back = Tensor::empty({256}, cpu);
  cpu.wait(copied);  // the CPU worker blocks in cudaEventSynchronize
  copy_async(back, device, cpu);
  std::vector<float> expected(256);
  for (int i = 0; i < 256; ++i) expected[static_cast<size_t>(i)] = 2.0f * i;
  CHECK(back.to_vector() == expected);
}

TEST_CASE("the CUDA allocator reuses a block on its stream and counts it" *
          doctest::skip(no_gpu || !brigade::Allocator::caching())) {
  Deadline deadline("cuda allocator");
  Stream s = Stream::create(Device::cuda(0));
  auto& alloc = brigade::Allocator::of(Device::cuda(0));
  const auto before = alloc.stats();
  auto a = alloc.allocate(3 << 20, s);
  void* memory = a->data();
  CHECK(alloc.stats().in_use == before.in_use + (3u << 20));
  a.reset();
  auto b = alloc.allocate(3 << 20, s);
  CHECK(b->data() == memory);
  CHECK(alloc.stats().capacity > 0);
}

TEST_CASE("a peer copy between two GPUs" * doctest::skip(brigade::cuda_device_count() < 2)) {
  Deadline deadline("peer copy");
  Stream s0 = Stream::create(Device::cuda(0));
  Stream s1 = Stream::create(Device::cuda(1));
  Tensor a = Tensor::from_vector(iota(300, 1.0f), {3, 100}, s0);
  Tensor b = Tensor::empty({3, 100}, s1);
  copy_async(b, a, s1);
  CHECK(b.to_vector() == iota(300, 1.0f));
}

#if defined(BRIGADE_CUDA_EMULATED)
// CUDA keeps every error a call returns as the thread's last error until cudaGetLastError,
// cudaErrorNotReady from cudaEventQuery/cudaStreamQuery included. The allocator and the
// runtime poll events; the next checked cudaGetLastError() after a healthy kernel launch must
// not report the poll. (Emulated GPUs only: a real one cannot be held busy on purpose.)
// A cudaEvent_t is made once and reused: a step records thousands of events, and each
// cudaEventCreate is a driver call. Records that only order work use untimed events.
TEST_CASE("event records reuse pooled cudaEvent_t objects" * doctest::skip(no_gpu)) {
  Deadline deadline("cuda event pool");
  Stream s = Stream::create(Device::cuda(0));
  Event timed = Event::timed();
  const auto records = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Event e;  // a fresh Event each time: its record gives the cudaEvent_t back when dropped
      e.record(s);
      e.synchronize();
      timed.record(s);  // re-recording drops the previous record after making the new one
    }
    timed.synchronize();
  };
  records(2);  // the pools now hold what the pattern needs at once
  const auto before = brigade::emu::gpu::api_counts();
  records(100);
  const auto after = brigade::emu::gpu::api_counts();
  CHECK(after.event_create == before.event_create);
  CHECK(after.event_destroy == before.event_destroy);
}

// The host side of GPU copies is page-locked memory of its own allocator, cached like any other.
TEST_CASE("pinned host tensors: page-locked, cached, and copied to a GPU and back exactly" *
          doctest::skip(no_gpu || !brigade::Allocator::caching())) {
  Deadline deadline("pinned host tensors");
  Stream cpu = Stream::create(Device::cpu(0));
  Stream gpu = Stream::create(Device::cuda(0));
  const auto values = iota(1000, 2.0f);
  const auto before = brigade::emu::gpu::api_counts();
  for (int round = 0; round < 2; ++round) {
    const Tensor pinned = Tensor::empty_pinned({1000}, cpu);
    cpu.enqueue([p = pinned.data<float>(), &values] {
      std::copy(values.begin(), values.end(), p);
    });
    const Tensor device = Tensor::empty({1000}, gpu);
    copy_async(device, pinned, cpu);
    Event copied;
    copied.record(cpu);
    gpu.wait(copied);
    CHECK(device.to_vector() == values);
  }
  // One cudaHostAlloc: the second round reused the first one's block.
  CHECK(brigade::emu::gpu::api_counts().host_alloc == before.host_alloc + 1);
  CHECK_THROWS_WITH_AS(brigade::Allocator::pinned_host(Device::cuda(0)),
                       "pinned host memory belongs to a CPU device, not cuda:0", brigade::Error);
}

TEST_CASE("polling pending CUDA work leaves no error for the next checked call" *
          doctest::skip(no_gpu)) {
  Deadline deadline("cuda query of pending work");
  Stream s = Stream::create(Device::cuda(0));
  brigade::emu::gpu::StreamHold hold(s.cuda_handle());
  Event e;
  e.record(s);
  CHECK_FALSE(e.query());
  CHECK_FALSE(s.query());
  CHECK(cudaGetLastError() == cudaSuccess);
  hold.release();
  e.synchronize();
  CHECK(e.query());
}

// A GPU block its owner stream takes back while its earlier work is still pending (the
// allocator's owner rule), then filled by a host stream, as the trainer's staging buffers are
// (allocator.h): the host stream's copy must wait for the owner's read of the old contents.
TEST_CASE("a GPU block the owner took back early is filled by a host stream only after the "
          "owner's earlier work" * doctest::skip(no_gpu || !brigade::Allocator::caching())) {
  Deadline deadline("GPU staging buffer reuse");
  Stream owner = Stream::create(Device::cuda(0)), host = Stream::create(Device::cpu(0));
  const std::vector<float> old_values(1024, 1.0f), new_values(1024, 2.0f);
  Tensor x = Tensor::from_vector(old_values, {1024}, owner);
  owner.synchronize();
  void* memory = x.storage()->data();
  const Tensor seen = Tensor::empty_pinned({1024}, host);  // page-locked: the copy is async
  brigade::emu::gpu::StreamHold hold(owner.cuda_handle());
  copy_async(seen, x, owner);  // the owner's earlier work: a read of x, held back
  x = Tensor();
  const Tensor staging = Tensor::empty({1024}, owner);
  REQUIRE(staging.storage()->data() == memory);  // taken back at once by its owner
  copy_async(staging, Tensor::from_vector(new_values, {1024}, host), host);
  Event filled;
  filled.record(host);
  const bool filled_before_the_read = brigade::testing::finishes_or_blocks(host, filled);
  hold.release();
  owner.synchronize();
  host.synchronize();
  CHECK_FALSE(filled_before_the_read);
  CHECK(seen.to_vector() == old_values);
}

// A block returning to the cache is poisoned on its owner stream (allocator.h), after the work
// of the streams declared with record_stream and before any reuse. A read on a stream that
// never declared itself, still queued when the block is freed, reads NaN; the same read
// declared reads the values. Without the poison it would read them both times: a real GPU
// frees nothing, it hands the stale bytes to the next owner, which usually looks right.
static std::vector<float> read_after_free(bool declared) {
  Stream owner = Stream::create(Device::cuda(0)), reader = Stream::create(Device::cuda(0));
  Stream host = Stream::create(Device::cpu(0));
  Tensor x = Tensor::from_vector(iota(1024, 1.0f), {1024}, owner);
  Event written;
  written.record(owner);
  reader.wait(written);
  const Tensor seen = Tensor::empty_pinned({1024}, host);  // page-locked: the copy is async
  brigade::emu::gpu::StreamHold hold(reader.cuda_handle());
  if (declared) x.record_stream(reader);
  // The reader's copy, behind the hold: a copy of the tensor's memory the allocator is told
  // about only through record_stream.
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(seen.data<float>(), x.data<float>(), 1024 * sizeof(float),
                                     cudaMemcpyDeviceToHost, reader.cuda_handle()));
  x = Tensor();  // freed while the read is still queued
  if (!declared) owner.synchronize();  // the poison has run (declared, it waits for the read)
  hold.release();
  owner.synchronize();
  reader.synchronize();
  return seen.to_vector();
}

// A GPU freed block whose work is still queued (held by a StreamHold) is memory about to be
// free: an allocation that fits once that work has run waits for it (the streams' pending
// frees, then the cache back to the device, then one retry) instead of reporting out of
// memory; one that cannot fit beside the live blocks fails at once. Sized from the emulated
// GPU's memory (BRIGADE_EMULATED_GPU_MEMORY: tests/engine/meson.build sets 1 GiB).
TEST_CASE("a GPU allocation that fits once freed blocks' queued work has run waits for it" *
          doctest::skip(no_gpu)) {
  Deadline deadline("GPU out of memory while memory is about to be freed");
  brigade::Allocator& alloc = brigade::Allocator::of(Device::cuda(0));
  alloc.empty_cache();  // what earlier cases left cached
  const brigade::MemoryStats before = alloc.stats();
  const uint64_t room = before.capacity - before.in_use;
  // Over half the room (a bin is at most 25% above the request): two never fit side by side.
  const uint64_t half_and_more = room * 3 / 5;
  Stream user = Stream::create(Device::cuda(0)), other = Stream::create(Device::cuda(0));
  auto freed = alloc.allocate(half_and_more, user);
  brigade::emu::gpu::StreamHold hold(user.cuda_handle());
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(freed->data(), 0, half_and_more, user.cuda_handle()));
  freed.reset();  // by the host, while the memset still waits behind the hold

  // A byte more than the room left beside the live blocks: no wait, the error at once.
  CHECK_THROWS_WITH_AS(alloc.allocate(room + 1, other),
                       ("cuda:0: out of memory allocating " + brigade::format_bytes(room + 1) +
                        " (in use " + brigade::format_bytes(before.in_use) + ", reserved " +
                        brigade::format_bytes(alloc.stats().reserved) + ", capacity " +
                        brigade::format_bytes(before.capacity) + ")")
                           .c_str(),
                       brigade::OutOfMemoryError);
  CHECK(alloc.stats().waits_for_pending == before.waits_for_pending);

  auto pending = std::async(std::launch::async, [&] { return alloc.allocate(half_and_more, other); });
  CHECK(brigade::testing::allocation_waits(alloc, before.waits_for_pending, pending));
  hold.release();
  auto block = pending.get();
  CHECK(cudaStreamQuery(user.cuda_handle()) == cudaSuccess);  // the held work ran first
  CHECK(block->size() == brigade::Allocator::block_size(half_and_more));
  CHECK(alloc.stats().waits_for_pending == before.waits_for_pending + 1);
}

TEST_CASE("a block freed while another stream still reads it: poison reaches an undeclared "
          "reader, a declared one reads the values" *
          doctest::skip(no_gpu || !brigade::Allocator::caching())) {
  Deadline deadline("poison on return to the cache");
  const std::vector<float> undeclared = read_after_free(/*declared=*/false);
  CHECK_MESSAGE(std::all_of(undeclared.begin(), undeclared.end(), [](float v) { return std::isnan(v); }),
                "a read no stream order puts before the free should read the poison (NaN), "
                "read "
                    << undeclared.front());
  CHECK(read_after_free(/*declared=*/true) == iota(1024, 1.0f));
}
#endif

// A copy between a CPU tensor and a GPU tensor ordered on a CPU stream is done when the CPU
// stream passes it: a CUDA stream that waits on an event recorded after it reads the data.
// (A pageable cudaMemcpy to the device may return before the data lands, and a non-blocking
// CUDA stream is not ordered after it.)
TEST_CASE("a host-to-GPU copy on a CPU stream is complete for a GPU stream that waits on it" *
          doctest::skip(no_gpu)) {
  Deadline deadline("host to GPU on a CPU stream");
  Stream cpu = Stream::create(Device::cpu(0));
  Stream gpu = Stream::create(Device::cuda(0));
  const auto values = iota(4096, 1.0f);
  const Tensor host = Tensor::from_vector(values, {4096}, cpu);
  const Tensor device = Tensor::empty({4096}, gpu);
  copy_async(device, host, cpu);
  Event copied;
  copied.record(cpu);
  gpu.wait(copied);
  CHECK(device.to_vector() == values);  // read on `gpu`, its allocation stream
  // And back: GPU to host on the CPU stream, after the GPU's own work.
  const Tensor back = Tensor::empty({4096}, cpu);
  Event written;
  written.record(gpu);
  cpu.wait(written);
  copy_async(back, device, cpu);
  CHECK(back.to_vector() == values);
}

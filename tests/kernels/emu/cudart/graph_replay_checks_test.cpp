// What a graph's replay on an emulated GPU is checked for, as strictly as the launches it holds
// (kernels/emu/cudart/graphs.cpp): races with the stream it runs on, and between branches of
// the capture that nothing orders (each forked stream replays as a stream of its own); memory
// freed since the capture, or taken back by the engine's allocator; each kernel's declared
// extents against its memory as it is at the launch. Emulated builds only, 6 GPUs of 64 MiB
// (tests/kernels/emu/cudart/meson.build); cuda:1 to cuda:5 are each faulted on purpose by one
// case (a fault is sticky).
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "kernels/cuda/launchers.h"
#include "kernels/emu/emulated_gpu.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/kernels/emu/cudart/graph_support.h"

using brigade::testing::allocation_name;
using brigade::testing::device_floats;
using brigade::testing::stream_on;
using namespace brigade::testing::graphs;

namespace {

// A capture on `s` that forks `side` off at its start and joins it back at its end, with
// `on_origin` enqueued on s and `on_fork` on side between: nothing orders the two.
template <class Origin, class Fork>
Captured capture_fork(cudaStream_t s, cudaStream_t side, Origin on_origin, Fork on_fork) {
  cudaEvent_t fork = nullptr, join = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
  const Captured graph = capture(s, [&] {
    REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
    on_origin();
    on_fork();
    REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(s, join, 0) == cudaSuccess);
  });
  for (cudaEvent_t e : {fork, join}) REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  return graph;
}

}  // namespace

TEST_CASE("a replay is checked for races on the stream it runs on") {
  // cuda:1, faulted by this case: a fault is sticky.
  cudaStream_t s = stream_on(1);
  cudaStream_t other = stream_on(1);
  float* a = device_floats(1, 1);
  const Captured graph =
      capture(s, [&] { REQUIRE(launch(s, "fill", fill, a, 1.0f, 1) == cudaSuccess); });

  // The replay on `other` and a write of `a` on `s` that nothing orders: a race, found.
  REQUIRE(launch(s, "fill", fill, a, 2.0f, 1) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(graph.exec, other) == cudaSuccess);
  CHECK(cudaStreamSynchronize(other) == cudaErrorLaunchFailure);
  const std::string report = last_error_text();
  CHECK(report.find("a data race") != std::string::npos);
  CHECK(report.find("kernel fill") != std::string::npos);
}

TEST_CASE("a replay that touches memory freed since the capture faults, as on a GPU") {
  // cuda:2, faulted by this case.
  cudaStream_t s = stream_on(2);
  float* a = device_floats(2, 1);
  const Captured graph =
      capture(s, [&] { REQUIRE(launch(s, "fill", fill, a, 1.0f, 1) == cudaSuccess); });
  REQUIRE(cudaFree(a) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);  // asynchronous, as a kernel's fault is
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  CHECK(last_error_text().find("no longer allocated") != std::string::npos);
}

TEST_CASE("branches of a graph that its events order replay without a race, launch after launch") {
  // A diamond: a is filled, then read by two branches at once (reads do not race), each
  // writing its own output; the fork is joined back, and the origin adds one output into the
  // other. Work after each launch on its stream reads what the forked branch wrote.
  cudaStream_t s = stream_on(0);
  cudaStream_t side = stream_on(0);
  cudaStream_t other = stream_on(0);
  float* a = device_floats(0, 1);
  float* b = device_floats(0, 1);
  float* c = device_floats(0, 1);
  float* d = device_floats(0, 1);
  cudaEvent_t fork = nullptr, join = nullptr, done = nullptr;
  for (cudaEvent_t* e : {&fork, &join, &done})
    REQUIRE(cudaEventCreateWithFlags(e, cudaEventDisableTiming) == cudaSuccess);
  const Captured diamond = capture(s, [&] {
    REQUIRE(launch(s, "fill", fill, a, 1.0f, 1) == cudaSuccess);
    REQUIRE(launch(s, "fill", fill, b, 0.0f, 1) == cudaSuccess);
    REQUIRE(launch(s, "fill", fill, c, 0.0f, 1) == cudaSuccess);
    REQUIRE(cudaEventRecord(fork, s) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
    REQUIRE(launch(side, "add_into", add_into, static_cast<const float*>(a), b, 1) == cudaSuccess);
    REQUIRE(launch(s, "add_into", add_into, static_cast<const float*>(a), c, 1) == cudaSuccess);
    REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(s, join, 0) == cudaSuccess);
    REQUIRE(launch(s, "add_into", add_into, static_cast<const float*>(b), c, 1) == cudaSuccess);
  });
  REQUIRE(launch(s, "fill", fill, d, 0.0f, 1) == cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    // Alternate streams: each launch is ordered after the previous one, and d's last use.
    cudaStream_t on = round % 2 == 0 ? s : other;
    cudaStream_t off = round % 2 == 0 ? other : s;
    REQUIRE(cudaEventRecord(done, off) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(on, done, 0) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(diamond.exec, on) == cudaSuccess);
    REQUIRE(launch(on, "add_into", add_into, static_cast<const float*>(b), d, 1) == cudaSuccess);
    CHECK(values_of(c, 1, on) == std::vector<float>{2});  // a + b, b = a = 1
    CHECK(values_of(d, 1, on) == std::vector<float>{static_cast<float>(round + 1)});
  }
  destroy(diamond);
  for (cudaEvent_t e : {fork, join, done}) REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  for (float* p : {a, b, c, d}) REQUIRE(cudaFree(p) == cudaSuccess);
  for (cudaStream_t st : {s, side, other}) REQUIRE(cudaStreamDestroy(st) == cudaSuccess);
}

TEST_CASE("two branches of one graph that nothing orders race at its replay, as on a GPU") {
  // cuda:3, faulted by this case. The capture forks `side` and joins it back, but its write of
  // a is not ordered with the origin's: a GPU may run the two at once. The replay runs them one
  // after the other; the check must still see two unordered branches.
  cudaStream_t s = stream_on(3);
  cudaStream_t side = stream_on(3);
  float* a = device_floats(3, 1);
  const Captured graph = capture_fork(
      s, side, [&] { REQUIRE(launch(s, "fill_on_origin", fill, a, 1.0f, 1) == cudaSuccess); },
      [&] { REQUIRE(launch(side, "fill_on_fork", fill, a, 2.0f, 1) == cudaSuccess); });
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
  const std::string report = last_error_text();
  INFO(report);
  CHECK(report.find("a data race on " + allocation_name(3, a, sizeof(float))) !=
        std::string::npos);
  CHECK(report.find("kernel fill_on_fork") != std::string::npos);
  CHECK(report.find("kernel fill_on_origin") != std::string::npos);
  CHECK(report.find("they are unordered branches of one graph") != std::string::npos);
}

TEST_CASE("two branches of one graph that nothing orders may write different bytes of one buffer") {
  // The race above, each branch writing its own half of the allocation (declared extents):
  // the bytes differ, so the two need no order, at the capture and at each replay.
  cudaStream_t s = stream_on(0);
  cudaStream_t side = stream_on(0);
  float* a = device_floats(0, 2);
  const Captured graph = capture_fork(
      s, side,
      [&] {
        REQUIRE(launch(s, "fill_on_origin", fill, BRIGADE_EXTENT(a, 1), 1.0f, 1) == cudaSuccess);
      },
      [&] {
        REQUIRE(launch(side, "fill_on_fork", fill, BRIGADE_EXTENT(a + 1, 1), 2.0f, 1) ==
                cudaSuccess);
      });
  for (int round = 0; round < 2; ++round) {
    REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
    CHECK(values_of(a, 2, s) == std::vector<float>{1, 2});
  }
  destroy(graph);
  REQUIRE(cudaFree(a) == cudaSuccess);
  for (cudaStream_t st : {s, side}) REQUIRE(cudaStreamDestroy(st) == cudaSuccess);
}

TEST_CASE("a replay checks a kernel's declared extents against its memory as it is then") {
  // cuda:4, faulted by this case. The capture's launch fits y; before the second replay the
  // allocator (here the test, by lend) gives y's block to a tensor one element shorter, and
  // the captured kernel would write past it, as a GPU would.
  constexpr int64_t kCount = 1000;
  const brigade::Stream stream = brigade::Stream::create(brigade::Device::cuda(4));
  const cudaStream_t s = stream.cuda_handle();
  float* x = device_floats(4, kCount);
  float* y = device_floats(4, kCount);
  REQUIRE(cudaMemsetAsync(x, 0, kCount * sizeof(float), s) == cudaSuccess);
  const Captured graph = capture(s, [&] { brigade::cuda::copy(x, y, kCount, stream); });
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  CHECK(values_of(y, 1, s) == std::vector<float>{0});
  REQUIRE(brigade::emu::gpu::lend(y, (kCount - 1) * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);  // asynchronous, as a kernel's fault is
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  const std::string report = last_error_text();
  INFO(report);
  CHECK(report.find("kernel copy_kernel on emulated cuda:4: argument 2 (y) is declared to touch "
                    "1000 elements of 4 bytes from byte 0 of emulated cuda:4 memory") !=
        std::string::npos);
  CHECK(report.find("(an allocation of 4000 bytes, 3996 of them lent to a tensor), which runs 4 "
                    "bytes (1 element) past the end of the tensor in it") != std::string::npos);
  float first = -1.0f;  // sticky: cuda:4 refuses every later call
  CHECK(cudaMemcpy(&first, y, sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorIllegalAddress);
  (void)cudaGetLastError();
}

TEST_CASE("a replay that touches a block the allocator took back since the capture faults, "
          "even where it is lent again as large") {
  // cuda:5, faulted by this case. y's block is lent to a tensor for the capture, then taken back
  // and lent again, at the same size, as the engine's cache lends a freed block to its next
  // tensor: the graph would write into that tensor on a GPU, whose memory unit sees nothing
  // wrong. The emulated GPU faults instead, stricter than a GPU.
  constexpr int64_t kCount = 1000;
  const brigade::Stream stream = brigade::Stream::create(brigade::Device::cuda(5));
  const cudaStream_t s = stream.cuda_handle();
  float* x = device_floats(5, kCount);
  float* y = device_floats(5, kCount);
  REQUIRE(brigade::emu::gpu::lend(y, kCount * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(x, 0, kCount * sizeof(float), s) == cudaSuccess);
  const Captured graph = capture(s, [&] { brigade::cuda::copy(x, y, kCount, stream); });
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);
  CHECK(values_of(y, 1, s) == std::vector<float>{0});
  REQUIRE(brigade::emu::gpu::lend(y, 0) == cudaSuccess);                       // back in the cache
  REQUIRE(brigade::emu::gpu::lend(y, kCount * sizeof(float)) == cudaSuccess);  // the next tensor
  REQUIRE(cudaGraphLaunch(graph.exec, s) == cudaSuccess);  // asynchronous, as a kernel's fault is
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  const std::string report = last_error_text();
  INFO(report);
  CHECK(report.find("kernel copy_kernel") != std::string::npos);
  CHECK(report.find("(an allocation of 4000 bytes, 4000 of them lent to a tensor), which the "
                    "engine's allocator has taken back since the capture") != std::string::npos);
  (void)cudaGetLastError();
}

// The emulated runtime's count of calls (cuda_emulation.h's CallCounts): each entry point by
// its name, and the classes a step's budget counts: kernel launches and calls that block the
// host. Each case knows, from the calls it makes, what the table must have gained. (Library
// calls are counted by tests/kernels/emu/vendor/vendor_libraries_test.cpp, through cuBLAS.)
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/cudart/launch.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::emu::gpu::call_counts;
using brigade::emu::gpu::CallCounts;
using brigade::testing::Deadline;
using brigade::testing::stream_on;

namespace {

uint64_t calls_of(const CallCounts& c, const std::string& name) {
  const auto it = c.by_entry_point.find(name);
  return it == c.by_entry_point.end() ? 0 : it->second;
}

}  // namespace

TEST_CASE("each entry point is counted once per call, by the name it was called by") {
  Deadline deadline("entry point counts");
  const CallCounts before = call_counts();
  cudaStream_t s = stream_on(0);  // cudaSetDevice, cudaStreamCreateWithFlags
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 64) == cudaSuccess);  // a wrapper of cudaHostAlloc in CUDA
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
  void* device = nullptr;
  REQUIRE(cudaMalloc(&device, 64) == cudaSuccess);
  REQUIRE(cudaMemset(device, 0, 64) == cudaSuccess);  // on the legacy stream: no cudaMemsetAsync
  for (int i = 0; i < 3; ++i) REQUIRE(cudaStreamQuery(s) == cudaSuccess);
  REQUIRE(cudaFree(device) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  const CallCounts d = call_counts().since(before);

  const std::vector<std::pair<std::string, uint64_t>> expected = {
      {"cudaFree", 1},         {"cudaFreeHost", 1},    {"cudaMalloc", 1},
      {"cudaMallocHost", 1},   {"cudaMemset", 1},      {"cudaSetDevice", 1},
      {"cudaStreamCreateWithFlags", 1}, {"cudaStreamDestroy", 1}, {"cudaStreamQuery", 3}};
  CHECK(d.by_entry_point.size() == expected.size());  // cudaHostAlloc, cudaMemsetAsync: none
  for (const auto& call : expected) CHECK_MESSAGE(calls_of(d, call.first) == call.second, call.first);
  CHECK(d.kernel_launches == 0);
  CHECK(d.library_calls == 0);
  CHECK(d.graph_launches == 0);
  // cudaFree and cudaFreeHost synchronise; the queries do not wait, whatever they answer.
  CHECK(d.host_blocking == 2);
}

TEST_CASE("a launch counts as cudaLaunchKernel and as a kernel launch") {
  Deadline deadline("launch counts");
  cudaStream_t s = stream_on(0);
  float* p = brigade::testing::device_floats(0, 1);
  const CallCounts before = call_counts();
  for (int i = 0; i < 5; ++i)
    REQUIRE(brigade::emu::launch_on_gpu(s, {"store_42", {1}, {1}, 0}, [p] { *p = 42.0f; }, {p}) ==
            cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  const CallCounts d = call_counts().since(before);
  CHECK(d.kernel_launches == 5);
  CHECK(calls_of(d, "cudaLaunchKernel") == 5);
  CHECK(calls_of(d, "cudaStreamSynchronize") == 1);
  CHECK(d.host_blocking == 1);
  REQUIRE(cudaFree(p) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("copies block the host exactly when CUDA says they do") {
  Deadline deadline("copy counts");
  cudaStream_t s = stream_on(0);
  float* device = brigade::testing::device_floats(0, 4);
  float pageable[4] = {1, 2, 3, 4};
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(pageable)) == cudaSuccess);
  const auto blocking_of = [](auto&& copy) {
    const CallCounts before = call_counts();
    REQUIRE(copy() == cudaSuccess);
    return call_counts().since(before).host_blocking;
  };
  // cudaMemcpyAsync returns at once, except into pageable memory, where it returns when done.
  CHECK(blocking_of([&] {
          return cudaMemcpyAsync(device, pageable, sizeof(pageable), cudaMemcpyHostToDevice, s);
        }) == 0);
  CHECK(blocking_of([&] {
          return cudaMemcpyAsync(pinned, device, sizeof(pageable), cudaMemcpyDeviceToHost, s);
        }) == 0);
  CHECK(blocking_of([&] {
          return cudaMemcpyAsync(pageable, device, sizeof(pageable), cudaMemcpyDeviceToHost, s);
        }) == 1);
  // cudaMemcpy waits, with the host at either end; device to device it does not.
  CHECK(blocking_of([&] {
          return cudaMemcpy(device, pageable, sizeof(pageable), cudaMemcpyHostToDevice);
        }) == 1);
  CHECK(blocking_of([&] {
          return cudaMemcpy(pageable, device, sizeof(pageable), cudaMemcpyDeviceToHost);
        }) == 1);
  CHECK(blocking_of([&] {
          return cudaMemcpy(device + 2, device, 2 * sizeof(float), cudaMemcpyDeviceToDevice);
        }) == 0);
  // The event's and the device's synchronisations wait; a query of the event does not.
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  CHECK(blocking_of([&] { return cudaEventSynchronize(e); }) == 1);
  CHECK(blocking_of([&] { return cudaEventQuery(e); }) == 0);
  CHECK(blocking_of([&] { return cudaDeviceSynchronize(); }) == 1);
  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  REQUIRE(cudaFreeHost(pinned) == cudaSuccess);
  REQUIRE(cudaFree(device) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("calls from many threads at once are all counted") {
  Deadline deadline("counts from threads");
  const CallCounts before = call_counts();
  constexpr int kThreads = 8, kCalls = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      int device = -1;
      for (int i = 0; i < kCalls; ++i) REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    });
  for (std::thread& t : threads) t.join();
  CHECK(calls_of(call_counts().since(before), "cudaGetDevice") == kThreads * kCalls);
}

// The emulated CUDA runtime (kernels/emu/cudart), rule by rule, through the CUDA API itself:
// each case is a sentence of NVIDIA's documentation (kernels/emu/cudart/README.md quotes it)
// and checks that the emulation fails, or answers, where a GPU would. Emulated builds only,
// with 3 GPUs of 64 MiB (tests/kernels/emu/meson.build). cuda:2 is faulted on purpose by the
// last case: a fault is sticky for the process, as on a GPU, so nothing before it uses cuda:2.
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/launchers.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/cudart/launch.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::testing::Deadline;
using brigade::testing::device_floats;
using brigade::testing::stream_on;

namespace {

// One thread that stores 42 at `p`: the smallest kernel, launched as BRIGADE_LAUNCH does.
cudaError_t store_42(cudaStream_t stream, float* p) {
  return brigade::emu::launch_on_gpu(stream, {"store_42", {1}, {1}, 0}, [p] { *p = 42.0f; }, {p});
}

cudaStream_t non_blocking(int device) { return stream_on(device); }

std::vector<uint32_t> bits_of(const float* device, size_t n) {
  std::vector<uint32_t> host(n);
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

}  // namespace

TEST_CASE("the current device belongs to each host thread") {
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  int other = -1;
  std::thread([&] { REQUIRE(cudaGetDevice(&other) == cudaSuccess); }).join();
  int mine = -1;
  REQUIRE(cudaGetDevice(&mine) == cudaSuccess);
  CHECK(mine == 1);
  CHECK(other == 0);  // a new thread starts on device 0
  CHECK(cudaSetDevice(3) == cudaErrorInvalidDevice);  // 3 GPUs: 0, 1, 2
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, then reset
}

TEST_CASE("a launch on a stream of another device than the current one fails") {
  Deadline deadline("launch against another device");
  cudaStream_t s0 = non_blocking(0);
  float* p = device_floats(0, 1);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  CHECK(store_42(s0, p) == cudaErrorInvalidResourceHandle);
  CHECK(std::string(cudaGetErrorString(cudaGetLastError())).find("current device is cuda:1") !=
        std::string::npos);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(store_42(s0, p) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s0) == cudaSuccess);
  float host = 0;
  REQUIRE(cudaMemcpy(&host, p, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host == 42.0f);
  CHECK(cudaFree(p) == cudaSuccess);
  CHECK(cudaStreamDestroy(s0) == cudaSuccess);
}

TEST_CASE("an event is recorded only on a stream of its own device; waits cross devices") {
  Deadline deadline("events across devices");
  cudaStream_t s0 = non_blocking(0), s1 = non_blocking(1);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaEvent_t e0 = nullptr;
  REQUIRE(cudaEventCreate(&e0) == cudaSuccess);  // on device 0, the current one
  CHECK(cudaEventRecord(e0, s1) == cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  CHECK(cudaEventRecord(e0, s0) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s1, e0, 0) == cudaSuccess);  // legal across devices
  CHECK(cudaStreamSynchronize(s1) == cudaSuccess);
  CHECK(cudaEventQuery(e0) == cudaSuccess);
  cudaEvent_t untimed = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, s0) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(untimed) == cudaSuccess);
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, untimed) == cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  for (cudaEvent_t e : {e0, untimed}) CHECK(cudaEventDestroy(e) == cudaSuccess);
  CHECK(cudaEventQuery(e0) == cudaErrorInvalidResourceHandle);  // a destroyed handle
  (void)cudaGetLastError();
  for (cudaStream_t s : {s0, s1}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("cudaErrorNotReady stays the thread's last error until cudaGetLastError") {
  Deadline deadline("not ready is sticky in the error state");
  cudaStream_t s = non_blocking(0);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  {
    brigade::emu::gpu::StreamHold hold(s);
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaErrorNotReady);
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    CHECK(cudaPeekAtLastError() == cudaErrorNotReady);  // peeking does not reset
    CHECK(cudaGetLastError() == cudaErrorNotReady);
    CHECK(cudaGetLastError() == cudaSuccess);
  }
  CHECK(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(cudaEventDestroy(e) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("fresh device memory is poisoned: every byte 0xFF, a NaN in every float") {
  float* p = device_floats(0, 100);
  CHECK(bits_of(p, 100) == std::vector<uint32_t>(100, 0xFFFFFFFFu));
  CHECK(cudaFree(p) == cudaSuccess);
  int stack_value = 0;
  CHECK(cudaFree(&stack_value) == cudaErrorInvalidValue);  // not from cudaMalloc
  (void)cudaGetLastError();
}

TEST_CASE("a pageable cudaMemcpy lands in time for a blocking stream") {
  Deadline deadline("pageable copy against a blocking stream");
  const std::vector<float> values(64, 3.5f);
  float* p = device_floats(0, 64);
  REQUIRE(cudaMemcpy(p, values.data(), 64 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  // A blocking stream (cudaStreamCreate) is ordered after the legacy stream: it sees the data.
  // (A non-blocking stream is not: it would read poison, and the happens-before check stops it
  // first — hb_test.cpp.)
  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  std::vector<float> late(64, 0.0f);
  REQUIRE(cudaMemcpyAsync(late.data(), p, 64 * sizeof(float), cudaMemcpyDeviceToHost, blocking) ==
          cudaSuccess);
  CHECK(late == values);
  CHECK(cudaStreamDestroy(blocking) == cudaSuccess);
  CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a copy must stay inside its allocation and match its direction") {
  float* p = device_floats(0, 4);
  float host[8] = {};
  // A GPU rounds the 16 bytes up to 256 and would copy 17 without a word; the emulated one
  // keeps the allocation exactly as asked, so one byte past the tensor is already out.
  CHECK(cudaMemcpy(host, p, 4 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaMemcpy(host, p, 4 * sizeof(float) + 1, cudaMemcpyDeviceToHost) ==
        cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host, p, 4 * sizeof(float), cudaMemcpyHostToDevice) ==
        cudaErrorInvalidMemcpyDirection);
  (void)cudaGetLastError();
  CHECK(cudaFree(p) == cudaSuccess);
}

// Every check above starts from the emulator's lookup of a pointer (Emulation::find). The
// address one past an allocation's end is not in it: other memory may begin there. A heap
// that keeps no header between its blocks (ThreadSanitizer's) put a host buffer right after
// an emulated GPU's allocation, and a copy from that buffer was refused as running past the
// allocation's end.
TEST_CASE("a pointer one past an allocation's end is not in that allocation") {
  float* p = device_floats(0, 4);  // 16 bytes
  const char* bytes = reinterpret_cast<const char*>(p);
  brigade::emu::gpu::Emulation& e = brigade::emu::gpu::Emulation::get();
  {
    std::lock_guard lock(e.mutex);
    const auto start_of = [&](const char* q, uint64_t n) {
      uintptr_t start = 0;
      return e.find(q, n, &start) == nullptr ? uintptr_t{0} : start;
    };
    const auto at = reinterpret_cast<uintptr_t>(p);
    CHECK(start_of(bytes, 16) == at);
    CHECK(start_of(bytes + 15, 0) == at);
    CHECK(start_of(bytes + 15, 1) == at);
    CHECK(start_of(bytes + 15, 2) == 0);
    CHECK(start_of(bytes + 1, 16) == 0);
    CHECK(start_of(bytes + 16, 0) != at);  // nothing there, or another allocation's start
  }
  CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a copy or memset with a null pointer and a nonzero count is cudaErrorInvalidValue") {
  // A real GPU refused cudaMemcpy of 1 byte from a null source; a zero count is legal.
  Deadline deadline("null pointers in copies");
  float* p = device_floats(0, 4);
  float* q = device_floats(1, 4);
  cudaStream_t s0 = non_blocking(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  auto refused = [](cudaError_t status, const std::string& call, const std::string& side) {
    CHECK(status == cudaErrorInvalidValue);
    const std::string text = cudaGetErrorString(cudaGetLastError());  // read, and reset
    CHECK_MESSAGE(text.find(call + ": the " + side + " is null") != std::string::npos, text);
  };
  refused(cudaMemcpy(p, nullptr, 1, cudaMemcpyHostToDevice), "cudaMemcpy", "source");
  refused(cudaMemcpy(nullptr, p, 1, cudaMemcpyDeviceToHost), "cudaMemcpy", "destination");
  refused(cudaMemcpy(p, nullptr, 1, cudaMemcpyDefault), "cudaMemcpy", "source");
  refused(cudaMemcpyAsync(p, nullptr, 4, cudaMemcpyHostToDevice, s0), "cudaMemcpyAsync",
          "source");
  refused(cudaMemcpyAsync(nullptr, p, 4, cudaMemcpyDeviceToHost, s0), "cudaMemcpyAsync",
          "destination");
  refused(cudaMemcpyPeer(nullptr, 1, p, 0, 4), "cudaMemcpyPeer", "destination");
  refused(cudaMemcpyPeerAsync(q, 1, nullptr, 0, 4, s0), "cudaMemcpyPeerAsync", "source");
  refused(cudaMemset(nullptr, 0, 4), "cudaMemset", "destination");
  refused(cudaMemsetAsync(nullptr, 0, 1, s0), "cudaMemsetAsync", "destination");
  // Nothing to copy or set: legal, and nothing happens.
  CHECK(cudaMemcpy(p, nullptr, 0, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpyAsync(nullptr, p, 0, cudaMemcpyDeviceToHost, s0) == cudaSuccess);
  CHECK(cudaMemcpyPeer(nullptr, 1, nullptr, 0, 0) == cudaSuccess);
  CHECK(cudaMemcpyPeerAsync(q, 1, nullptr, 0, 0, s0) == cudaSuccess);
  CHECK(cudaMemset(nullptr, 0, 0) == cudaSuccess);
  CHECK(cudaMemsetAsync(nullptr, 0, 0, s0) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
  // The refusals faulted nothing: cuda:0 still runs work.
  CHECK(store_42(s0, p) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s0) == cudaSuccess);
  CHECK(bits_of(p, 1)[0] == 0x42280000u);  // 42.0f
  CHECK(cudaStreamDestroy(s0) == cudaSuccess);
  CHECK(cudaFree(p) == cudaSuccess);
  CHECK(cudaFree(q) == cudaSuccess);
}

// A failing call is also the thread's last error until cudaGetLastError reads it, and every
// hand-written launch checks cudaGetLastError() (BRIGADE_LAUNCH): a failure BRIGADE_CUDA_CHECK
// threw, and the caller caught, must not be reported again as the next healthy launch's.
TEST_CASE("a failure BRIGADE_CUDA_CHECK threw is not reported again by the next launch") {
  Deadline deadline("a stale error after a caught failure");
  float* x = device_floats(0, 4);
  float* y = device_floats(0, 4);
  const std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f};
  REQUIRE(cudaMemcpy(x, values.data(), 4 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the pageable copy has landed
  const brigade::Stream stream = brigade::Stream::create(brigade::Device::cuda(0));
  std::vector<float> host(5);
  // One float past the end of y: cudaErrorInvalidValue, not sticky.
  CHECK_THROWS_AS(BRIGADE_CUDA_CHECK(cudaMemcpy(host.data(), y, 5 * sizeof(float),
                                                cudaMemcpyDeviceToHost)),
                  brigade::Error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  CHECK_NOTHROW(brigade::cuda::copy(x, y, 4, stream));
  stream.synchronize();
  CHECK(bits_of(y, 4) == bits_of(x, 4));
  CHECK(cudaFree(x) == cudaSuccess);
  CHECK(cudaFree(y) == cudaSuccess);
}

TEST_CASE("cudaMalloc beyond a GPU's capacity is out of memory, and the GPU stays usable") {
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  void* big = nullptr;
  CHECK(cudaMalloc(&big, size_t{65} << 20) == cudaErrorMemoryAllocation);  // 64 MiB each
  CHECK(std::string(cudaGetErrorString(cudaGetLastError())).find("emulated cuda:1") !=
        std::string::npos);
  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total == size_t{64} << 20);
  float* small = device_floats(1, 16);
  CHECK(cudaFree(small) == cudaSuccess);
}

TEST_CASE("peer memory: a kernel may touch it once access is enabled; without, the GPU faults") {
  Deadline deadline("peer access");
  float* on1 = device_floats(1, 1);
  cudaStream_t s0 = non_blocking(0);
  int can = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess);
  REQUIRE(can == 1);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
  CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled);
  (void)cudaGetLastError();
  CHECK(store_42(s0, on1) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s0) == cudaSuccess);
  CHECK(bits_of(on1, 1)[0] == 0x42280000u);  // 42.0f
  // cuda:2 never enabled access to cuda:1: the launch succeeds, the kernel faults, and the
  // fault surfaces at the next synchronising call and stays (a sticky error).
  cudaStream_t s2 = non_blocking(2);
  void* pinned = nullptr;  // cuda:2 current: page-locked memory of its context
  REQUIRE(cudaMallocHost(&pinned, 4) == cudaSuccess);
  CHECK(store_42(s2, on1) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s2) == cudaErrorIllegalAddress);
  CHECK(std::string(cudaGetErrorString(cudaGetLastError())).find("peer access") !=
        std::string::npos);
  void* more = nullptr;
  CHECK(cudaMalloc(&more, 4) == cudaErrorIllegalAddress);  // cuda:2 is current, and faulted
  CHECK(cudaMallocHost(&more, 4) == cudaErrorIllegalAddress);  // pinned memory: its context's
  CHECK(cudaFreeHost(pinned) == cudaErrorIllegalAddress);
  (void)cudaGetLastError();
  REQUIRE(cudaSetDevice(1) == cudaSuccess);                  // cuda:1 is healthy
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  CHECK(bits_of(on1, 1)[0] == 0x42280000u);                  // the kernel wrote nothing
}

// Pinned host memory (cudaMallocHost) on emulated GPUs (kernels/emu/cudart/pinned.cpp), through
// the CUDA API. CUDA: "For all other transfers, the function should be fully asynchronous"
// (Runtime API, API synchronization behavior): a copy into pinned memory writes it, and one
// from it reads it, at some time after cudaMemcpyAsync returns. On a GPU a host that reads the
// destination, or writes the source, before it has seen the copy done gets the old bytes or the
// new depending on timing; the emulated GPU fails every time: the destination reads NaN, a
// changed source faults the GPU, and the engine's allocator may not lend the memory to a tensor.
// Each rule is shown to fail the wrong order and to let the right one pass. Emulated builds
// only, with 2 GPUs (tests/kernels/emu/cudart/meson.build): the case that faults a GPU has
// cuda:1 to itself (a fault is sticky); the others share cuda:0.
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::emu::gpu::lend;
using brigade::emu::gpu::StreamHold;
using brigade::testing::Deadline;
using brigade::testing::device_floats;
using brigade::testing::stream_on;

namespace {

// `values` in fresh memory of `device`, copied there and waited for.
float* device_values(int device, const std::vector<float>& values) {
  float* d = device_floats(device, values.size());
  REQUIRE(cudaMemcpy(d, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return d;
}

// `n` floats of pinned host memory, each `value`.
float* pinned_floats(size_t n, float value) {
  void* p = nullptr;
  REQUIRE(cudaMallocHost(&p, n * sizeof(float)) == cudaSuccess);
  auto* f = static_cast<float*>(p);
  for (size_t i = 0; i < n; ++i) f[i] = value;
  return f;
}

std::vector<float> host_values(const float* host, size_t n) { return {host, host + n}; }

// What the device holds, read through a blocking copy into pageable memory.
std::vector<float> device_contents(const float* device, size_t n) {
  std::vector<float> host(n);
  REQUIRE(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  return host;
}

bool all_poison(const float* host, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, host + i, sizeof bits);
    if (bits != 0xFFFFFFFFu) return false;
  }
  return true;
}

const std::vector<float> kData = {1, 2, 3, 4};
const std::vector<float> kOther = {5, 6, 7, 8};

}  // namespace

TEST_CASE("a copy into pinned memory: NaN until the host has waited for it, then the data") {
  Deadline deadline("pinned download");
  cudaStream_t s = stream_on(0);
  float* d = device_values(0, kData);
  float* pinned = pinned_floats(4, 9);

  // Read before any wait: NaN, whether the stream has run the copy or not.
  REQUIRE(cudaMemcpyAsync(pinned, d, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(all_poison(pinned, 4));
  CHECK(std::isnan(pinned[0]));
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(host_values(pinned, 4) == kData);

  // Seen done through an event: NaN while the query says not ready, the data once it says done.
  std::fill(pinned, pinned + 4, 9.0f);
  cudaEvent_t copied = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming) == cudaSuccess);
  {
    StreamHold hold(s);
    REQUIRE(cudaMemcpyAsync(pinned, d, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    REQUIRE(cudaEventRecord(copied, s) == cudaSuccess);
    CHECK(cudaEventQuery(copied) == cudaErrorNotReady);
    CHECK(cudaGetLastError() == cudaErrorNotReady);
    CHECK(all_poison(pinned, 4));
  }
  while (cudaEventQuery(copied) == cudaErrorNotReady) CHECK(all_poison(pinned, 4));
  cudaGetLastError();  // the loop's cudaErrorNotReady, if any
  CHECK(host_values(pinned, 4) == kData);

  // A blocking cudaMemcpy into pinned memory returns with the data there.
  std::fill(pinned, pinned + 4, 9.0f);
  REQUIRE(cudaMemcpy(pinned, d, 16, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host_values(pinned, 4) == kData);

  // A stream destroyed with the copy in it still runs it ("the resources associated with
  // stream will be released automatically once the device has completed all work in stream"):
  // cudaDeviceSynchronize waits for it, and the data lands.
  std::fill(pinned, pinned + 4, 9.0f);
  cudaStream_t gone = stream_on(0);
  REQUIRE(cudaMemcpyAsync(pinned, d, 16, cudaMemcpyDeviceToHost, gone) == cudaSuccess);
  CHECK(cudaStreamDestroy(gone) == cudaSuccess);
  CHECK(all_poison(pinned, 4));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(host_values(pinned, 4) == kData);

  CHECK(cudaEventDestroy(copied) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("device work ordered after a copy into pinned memory sees its data, landed or not") {
  Deadline deadline("pinned download, then device work");
  cudaStream_t s = stream_on(0), other = stream_on(0);
  float* a = device_values(0, kData);
  float* b = device_values(0, kOther);
  float* back = device_floats(0, 4);
  float* pinned = pinned_floats(4, 9);

  // Down, then up again from the same pinned bytes on the same stream: the upload sends the
  // download's data, though the host has not seen it (the destination stays NaN to the host).
  REQUIRE(cudaMemcpyAsync(pinned, a, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(back, pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(all_poison(pinned, 4));
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(device_contents(back, 4) == kData);
  CHECK(host_values(pinned, 4) == kData);

  // Two downloads into the same bytes, ordered by an event: seeing the first done lands it,
  // and the bytes are NaN again until the second is seen done; then they hold the second's.
  cudaEvent_t first = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&first, cudaEventDisableTiming) == cudaSuccess);
  {
    StreamHold hold(other);
    REQUIRE(cudaMemcpyAsync(pinned, a, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    REQUIRE(cudaEventRecord(first, s) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(other, first, 0) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(pinned, b, 16, cudaMemcpyDeviceToHost, other) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(first) == cudaSuccess);
    CHECK(all_poison(pinned, 4));
  }
  REQUIRE(cudaStreamSynchronize(other) == cudaSuccess);
  CHECK(host_values(pinned, 4) == kOther);

  // An upload issued before a download into its source sends the bytes of its call: the
  // download's NaN and landing are the emulator's writes, not the host's.
  std::fill(pinned, pinned + 4, 3.0f);
  {
    StreamHold hold(s);
    REQUIRE(cudaMemcpyAsync(back, pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(pinned, a, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    CHECK(all_poison(pinned, 4));
  }
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(device_contents(back, 4) == std::vector<float>(4, 3.0f));
  CHECK(host_values(pinned, 4) == kData);

  CHECK(cudaEventDestroy(first) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  for (float* p : {a, b, back}) CHECK(cudaFree(p) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaStreamDestroy(other) == cudaSuccess);
}

TEST_CASE("a copy from pinned memory: the source may be written once the host saw it done") {
  Deadline deadline("pinned upload, in order");
  cudaStream_t s = stream_on(0);
  float* d = device_floats(0, 4);
  float* pinned = pinned_floats(4, 2);
  {
    StreamHold hold(s);  // the copy runs long after the call: the source is read then
    REQUIRE(cudaMemcpyAsync(d, pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
  }
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  std::fill(pinned, pinned + 4, 5.0f);  // after the wait: the copy has sent the 2s
  CHECK(device_contents(d, 4) == std::vector<float>(4, 2.0f));
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("the host writing a pinned source before its copy ran faults the GPU") {
  Deadline deadline("pinned upload, source written early");
  cudaStream_t s = stream_on(1);
  float* d = device_floats(1, 4);
  float* pinned = pinned_floats(4, 2);
  {
    StreamHold hold(s);
    REQUIRE(cudaMemcpyAsync(d, pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
    pinned[2] = 1.1f;  // on a GPU: sent as 2 or as 1.1 (every byte differs), depending on timing
  }
  CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
  const std::string why = cudaGetErrorString(cudaGetLastError());
  CHECK(why.find("cudaMemcpyAsync from pinned host memory on emulated cuda:1") !=
        std::string::npos);
  CHECK(why.find("the host wrote the pinned source of a cudaMemcpyAsync before the copy ran: "
                 "pinned host memory") != std::string::npos);
  CHECK(why.find("(an allocation of 16 bytes), its bytes 8 to 11 changed") != std::string::npos);
  // cuda:1 is faulted for good, and refuses pinned memory as every call: freed from cuda:0.
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
}

TEST_CASE("pinned memory may be lent to a tensor only once the host saw its copies done") {
  Deadline deadline("lend of pinned memory");
  cudaStream_t s = stream_on(0);
  float* d = device_values(0, kData);
  float* pinned = pinned_floats(4, 2);
  CHECK(lend(pinned, 16) == cudaSuccess);  // no copy yet

  // A download into it pending: its tensor's host code would read NaN, or race the DMA.
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  {
    StreamHold hold(s);
    REQUIRE(cudaMemcpyAsync(pinned, d, 16, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    REQUIRE(cudaEventRecord(done, s) == cudaSuccess);
    CHECK(lend(pinned, 0) == cudaSuccess);  // back in the cache: nobody's to write
    CHECK(lend(pinned, 16) == cudaErrorInvalidValue);
    const std::string why = cudaGetErrorString(cudaGetLastError());
    CHECK(why.find("is lent to a tensor whose host code may write it, but cudaMemcpyAsync (its "
                   "destination) on emulated cuda:0") != std::string::npos);
  }
  while (cudaEventQuery(done) == cudaErrorNotReady) {
  }
  cudaGetLastError();  // the loop's cudaErrorNotReady, if any
  CHECK(lend(pinned, 16) == cudaSuccess);  // a query answered done
  CHECK(host_values(pinned, 4) == kData);

  // An upload from it pending: the tensor's host code would change what the DMA sends.
  {
    StreamHold hold(s);
    REQUIRE(cudaMemcpyAsync(d, pinned, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(lend(pinned, 16) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  }
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(lend(pinned, 16) == cudaSuccess);

  CHECK(cudaEventDestroy(done) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

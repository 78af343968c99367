// Pinned host memory (cudaMallocHost) on emulated GPUs, through the CUDA API. CUDA: "For all
// other transfers, the function should be fully asynchronous" (Runtime API, API
// synchronization behavior): a copy into pinned memory writes it, and one from it reads it, at
// some time after cudaMemcpyAsync returns. On a GPU a host that writes the memory before it has
// seen the copy done races the DMA; the emulated GPU refuses to lend it to a tensor (the
// engine's allocator, lend in cuda_emulation.h) until the host has. Emulated builds only, with
// 2 GPUs (tests/kernels/emu/cudart/meson.build).
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

const std::vector<float> kData = {1, 2, 3, 4};

}  // namespace

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

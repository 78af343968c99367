// What emulated GPUs offer beyond the CUDA API: for tests of the code above the runtime, which
// need a GPU to be busy at a known point (a real GPU is busy for a while nobody controls).
// Not part of CUDA; only tests include it, in emulated builds (BRIGADE_CUDA_EMULATED).
#pragma once

#include <memory>

#include "cuda_runtime_api.h"

namespace brigade::emu::gpu {

// How often the process has made the calls that a GPU program keeps out of its steady state:
// each allocates, frees, creates or destroys, or stalls a whole device or the host. A test
// runs a step to warm up, then checks that the next one adds none of them.
struct ApiCounts {
  uint64_t malloc = 0, free = 0;                 // cudaMalloc, cudaFree
  uint64_t host_alloc = 0, host_free = 0;        // cudaMallocHost / cudaHostAlloc, cudaFreeHost
  uint64_t event_create = 0, event_destroy = 0;  // cudaEventCreate*, cudaEventDestroy
  uint64_t stream_create = 0, stream_destroy = 0;
  uint64_t device_synchronize = 0;  // cudaDeviceSynchronize
  uint64_t stream_synchronize = 0;  // cudaStreamSynchronize
  uint64_t legacy_memcpy = 0;       // cudaMemcpy, cudaMemcpyPeer (the legacy stream's copies)
};
ApiCounts api_counts();

// Stops `stream` at this point of its work until the hold is released (or destroyed): work
// enqueued after it stays pending, so queries answer cudaErrorNotReady for as long as a test
// needs. The stream's device must be current, as for a launch.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream);
  ~StreamHold() { release(); }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void release();

 private:
  std::shared_ptr<bool> released_;
};

}  // namespace brigade::emu::gpu

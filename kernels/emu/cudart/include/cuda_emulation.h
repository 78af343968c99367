// What emulated GPUs offer beyond the CUDA API: for tests of the code above the runtime, which
// need a GPU to be busy at a known point (a real GPU is busy for a while nobody controls).
// Not part of CUDA; only tests include it, in emulated builds (BRIGADE_CUDA_EMULATED).
#pragma once

#include <memory>

#include "cuda_runtime_api.h"

namespace brigade::emu::gpu {

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

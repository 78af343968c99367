// What emulated GPUs offer beyond the CUDA API: for tests of the code above the runtime, which
// need a GPU to be busy at a known point (a real GPU is busy for a while nobody controls), and
// for the engine's allocator, which poisons the blocks it takes back (poison_async).
// Not part of CUDA; included only in emulated builds (BRIGADE_CUDA_EMULATED).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cuda_runtime_api.h"

namespace brigade::emu::gpu {

// How often the process has made the calls that a GPU program keeps out of its steady state:
// each allocates, frees, creates or destroys, or stalls a whole device or the host. A test
// runs a step to warm up, then checks that the next one adds none of them.
struct ApiCounts {
  uint64_t malloc = 0, free = 0;                 // cudaMalloc, cudaFree
  uint64_t malloc_bytes = 0, free_bytes = 0;     // their sizes, summed
  uint64_t host_alloc = 0, host_free = 0;        // cudaMallocHost / cudaHostAlloc, cudaFreeHost
  uint64_t event_create = 0, event_destroy = 0;  // cudaEventCreate*, cudaEventDestroy
  uint64_t stream_create = 0, stream_destroy = 0;
  uint64_t device_synchronize = 0;  // cudaDeviceSynchronize
  uint64_t stream_synchronize = 0;  // cudaStreamSynchronize
  uint64_t legacy_memcpy = 0;       // cudaMemcpy, cudaMemcpyPeer (the legacy stream's copies)
};
ApiCounts api_counts();

// How often the host called each entry point of the emulated runtime, cuBLAS, cuDNN and NCCL
// since the process started, and the classes of call a GPU step's launch budget counts: what
// `brigade-bench --count-calls` prints per step, and what the budget tests assert. Take one
// before and one after the work, and subtract (since).
struct CallCounts {
  // Every call by its API name ("cudaStreamWaitEvent", "cudnnConvolutionForward"), failed
  // calls included; a kernel launch is "cudaLaunchKernel", what <<<>>> compiles to.
  std::map<std::string, uint64_t, std::less<>> by_entry_point;
  uint64_t kernel_launches = 0;  // grids enqueued on a stream
  uint64_t library_calls = 0;    // cuBLAS, cuDNN and NCCL calls that enqueued work on a stream
  uint64_t graph_launches = 0;   // cudaGraphLaunch calls that enqueued their graph
  // Calls that waited on the host for a GPU: cudaStreamSynchronize, cudaEventSynchronize,
  // cudaDeviceSynchronize, cudaFree and cudaFreeHost (they synchronise), cudaMemcpy to or
  // from host memory, cudaMemcpyAsync to pageable memory. A query (cudaStreamQuery,
  // cudaEventQuery) does not wait, whatever it answers.
  uint64_t host_blocking = 0;

  CallCounts since(const CallCounts& before) const;  // this minus `before`; names added only
};
CallCounts call_counts();

// Fills `bytes` bytes of device memory from `memory` with the pattern of fresh cudaMalloc
// memory (every byte 0xFF: a NaN in every float, -1 in every int32), as a task of `stream`:
// after the stream's earlier work, before its later work. The engine's allocator calls it when
// a block returns to its cache, so a use the allocator's stream rules do not order after the
// free (a read on a stream never declared with record_stream, a reuse without the wait) reads
// NaN on an emulated GPU, where a real one would read stale data that usually looks right.
// Unlike a launch it needs no current device: the allocator frees blocks from any thread.
// cudaErrorInvalidValue unless the range lies in one device allocation; a faulted GPU's fault.
cudaError_t poison_async(void* memory, size_t bytes, cudaStream_t stream);

// The engine's allocator lends a block of its cache to one tensor at a time, and the block is
// usually longer than the tensor (sizes are rounded to bins: engine/allocator.h). lend(block,
// bytes) tells the emulator how much of the allocation starting at `block` the tensor asked for,
// and lend(block, 0) that the block is back in the cache: from then on, a kernel's declared
// extent (BRIGADE_EXTENT), a copy or a memset that reaches past those bytes faults as one past
// the allocation's end does, so the cache's rounding hides no overrun and a launch on a freed
// block is caught at the launch. Memory never lent (a test's own cudaMalloc) stays usable whole.
// A pinned block (cudaHostAlloc) lent to a tensor is its host code's to write: lend(block,
// bytes > 0) of one is cudaErrorInvalidValue, naming the copy, while a copy from or into it is
// not yet seen done by the host (no stream or event synchronised, no query answered done since).
// cudaErrorInvalidValue unless `block` starts an allocation at least `bytes` long.
cudaError_t lend(void* block, size_t bytes);

// BRIGADE_EMU_CHAOS=SEED from a test (a seed from 0 to 2^62 - 1): streams created from now on,
// and every host thread, draw their random delays from `seed`; none stops the delays. Returns
// the seed before. kernels/emu/cudart/chaos.cpp says what the delays are.
std::optional<uint64_t> set_chaos_seed(std::optional<uint64_t> seed);

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

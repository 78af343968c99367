// The CUDA half of allocator.cpp: raw device memory.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/event.h"
#include "engine/stream.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif

namespace brigade::detail {

void* cuda_raw_allocate(const Device& device, uint64_t size) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, size);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it, the caller reports out of memory
    return nullptr;
  }
  BRIGADE_CUDA_CHECK(status);
  return data;
}

void cuda_raw_free(const Device& device, void* data) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
  BRIGADE_CUDA_CHECK(cudaFree(data));
}

// Emulated GPUs poison a block as it returns to the cache, on its owner stream after the work
// of its declared users (the owner waits for their events, which only adds order), so a
// correct program never reads the poison and a use the allocator's rules do not order after
// the free reads NaN (cuda_emulation.h). A real GPU skips it all: a fill per free would cost a
// kernel and memory bandwidth, and the waits would serialise streams, for nothing.
// The engine's only tests of BRIGADE_CUDA_EMULATED (here, in cuda_lend and at the include
// above): the emulated runtime's extensions exist only in that build.
void cuda_poison_returned(void* data, uint64_t size, const Stream& owner,
                          const std::vector<Event>& users_done) {
#if defined(BRIGADE_CUDA_EMULATED)
  for (const Event& done : users_done)
    if (!done.query()) owner.wait(done);
  BRIGADE_CUDA_CHECK(brigade::emu::gpu::poison_async(data, size, owner.cuda_handle()));
#else
  (void)data, (void)size, (void)owner, (void)users_done;
#endif
}

// Emulated GPUs only: the bytes of a block its tensor asked for, 0 when it returns to the cache
// (cuda_emulation.h's lend), so the emulator's bounds checks stop at the tensor's end, not at
// the end of its rounded-up block.
void cuda_lend(void* data, uint64_t bytes) {
#if defined(BRIGADE_CUDA_EMULATED)
  BRIGADE_CUDA_CHECK(brigade::emu::gpu::lend(data, bytes));
#else
  (void)data, (void)bytes;
#endif
}

void* cuda_pinned_allocate(uint64_t size) {
  void* data = nullptr;
  const cudaError_t status = cudaHostAlloc(&data, size, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: the caller reports out of memory
    return nullptr;
  }
  BRIGADE_CUDA_CHECK(status);
  return data;
}

void cuda_pinned_free(void* data) { BRIGADE_CUDA_CHECK(cudaFreeHost(data)); }

uint64_t cuda_total_memory(const Device& device) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
  size_t free_bytes = 0, total_bytes = 0;
  BRIGADE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes;
}

}  // namespace brigade::detail

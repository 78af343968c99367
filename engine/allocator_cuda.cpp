// The CUDA half of allocator.cpp: raw device memory.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/device.h"
#include "engine/error.h"

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

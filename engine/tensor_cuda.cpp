// The CUDA half of tensor.cpp: copies and fills issued on CUDA streams.
#include <cuda_runtime_api.h>

#include "engine/error.h"
#include "engine/stream.h"

namespace brigade::detail {

// Ordered on `stream`, a CUDA stream of one of the two devices.
void cuda_memcpy_async(void* dst, const Device& dst_device, const void* src,
                       const Device& src_device, uint64_t bytes, const Stream& stream) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(stream.device().index));
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) {
    BRIGADE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes,
                                           stream.cuda_handle()));
    return;
  }
  // Unified addressing tells host from device pointers: H2D, D2H or D2D on one GPU.
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.cuda_handle()));
}

// On a CPU stream's worker: the copy is done when this returns.
void cuda_memcpy_blocking(void* dst, const Device& dst_device, const void* src,
                          const Device& src_device, uint64_t bytes) {
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    BRIGADE_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, bytes));
    return;
  }
  BRIGADE_CUDA_CHECK(cudaSetDevice(dst_device.is_cuda() ? dst_device.index : src_device.index));
  BRIGADE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

void cuda_memset_async(void* dst, uint64_t bytes, const Stream& stream) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(stream.device().index));
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream.cuda_handle()));
}

}  // namespace brigade::detail

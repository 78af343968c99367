// The CUDA half of tensor.cpp: copies and fills issued on CUDA streams.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

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

namespace {
// One stream per GPU for the copies that CPU streams order (cuda_memcpy_blocking): made at
// first use, kept for the process. Never destroyed, map and lock included: the workers of
// CPU devices' default streams are never joined, and one may still copy while the program's
// static objects are destroyed at its exit.
cudaStream_t host_copy_stream(int device) {
  static auto* const mutex = new std::mutex();
  static auto* const streams = new std::map<int, cudaStream_t>();
  std::lock_guard<std::mutex> lock(*mutex);
  cudaStream_t& s = (*streams)[device];
  if (s == nullptr) BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
}  // namespace

// On a CPU stream's worker: the copy is done when this returns. Not cudaMemcpy: from pageable
// memory to a device it may return before the data lands, and cudaMemcpyPeer returns before
// the copy is done; neither is ordered with the non-blocking streams that read the result
// after waiting on the CPU stream. An asynchronous copy on a stream of our own, then a
// synchronisation of that stream, is done when it returns.
void cuda_memcpy_blocking(void* dst, const Device& dst_device, const void* src,
                          const Device& src_device, uint64_t bytes) {
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  BRIGADE_CUDA_CHECK(cudaSetDevice(device));
  const cudaStream_t stream = host_copy_stream(device);
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device)
    BRIGADE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes,
                                           stream));
  else
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void cuda_memset_async(void* dst, uint64_t bytes, const Stream& stream) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(stream.device().index));
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream.cuda_handle()));
}

}  // namespace brigade::detail

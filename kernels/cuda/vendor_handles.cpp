// The per-device handle caches behind CublasLease and CudnnLease (vendor_handles.h).
#include "kernels/cuda/vendor_handles.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>

#include "engine/error.h"

namespace brigade::cuda::vendor {
namespace {

// One handle and its lock per device index; the map itself under its own lock.
template <class Handle>
struct Slot {
  std::mutex mutex;
  Handle handle = nullptr;
};

template <class Handle>
Slot<Handle>& slot_for(int device) {
  static std::mutex map_mutex;
  static auto* slots = new std::map<int, std::unique_ptr<Slot<Handle>>>();  // never freed
  std::lock_guard<std::mutex> lock(map_mutex);
  auto& slot = (*slots)[device];
  if (!slot) slot = std::make_unique<Slot<Handle>>();
  return *slot;
}

int cuda_index_of(const Stream& stream, const char* library) {
  BRIGADE_CHECK(stream.device().is_cuda(), library << " needs a CUDA stream, got "
                                                   << stream.str()
                                                   << " (the vendor paths are GPU-only)");
  return stream.device().index;
}

}  // namespace

CublasLease::CublasLease(const Stream& stream) {
  const int device = cuda_index_of(stream, "cuBLAS");
  BRIGADE_CUDA_CHECK(cudaSetDevice(device));  // the handle belongs to this device
  Slot<cublasHandle_t>& slot = slot_for<cublasHandle_t>(device);
  lock_ = std::unique_lock<std::mutex>(slot.mutex);
  if (slot.handle == nullptr) {
    BRIGADE_CUBLAS_CHECK(cublasCreate(&slot.handle));
    // Plain FP32: no TF32 tensor-core rounding, so results agree with gemm_tiled to float
    // rounding. (This is cuBLAS's default too; saying it makes it independent of that.)
    BRIGADE_CUBLAS_CHECK(cublasSetMathMode(slot.handle, CUBLAS_DEFAULT_MATH));
  }
  handle_ = slot.handle;
  BRIGADE_CUBLAS_CHECK(cublasSetStream(handle_, stream.cuda_handle()));
}

CudnnLease::CudnnLease(const Stream& stream) {
  const int device = cuda_index_of(stream, "cuDNN");
  BRIGADE_CUDA_CHECK(cudaSetDevice(device));
  Slot<cudnnHandle_t>& slot = slot_for<cudnnHandle_t>(device);
  lock_ = std::unique_lock<std::mutex>(slot.mutex);
  if (slot.handle == nullptr) BRIGADE_CUDNN_CHECK(cudnnCreate(&slot.handle));
  handle_ = slot.handle;
  BRIGADE_CUDNN_CHECK(cudnnSetStream(handle_, stream.cuda_handle()));
}

}  // namespace brigade::cuda::vendor

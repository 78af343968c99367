// The per-device handle pools behind CublasLease and CudnnLease (vendor_handles.h).
#include "kernels/cuda/vendor_handles.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {
namespace {

// The idle handles of one device and math mode; a leased handle is in no pool until it is
// given back. A cuBLAS handle's math mode is set once, when it is made, so a lease never
// changes the mode of a handle (one cublasSetMathMode per handle, none per call); a cuDNN
// handle has no math mode (its convolution descriptors have), so its pools are fp32's only.
template <class Handle>
struct Pool {
  std::mutex mutex;
  std::vector<Handle> idle;
};

template <class Handle>
Pool<Handle>& pool_for(int device, MathMode mode) {
  static std::mutex map_mutex;
  static auto* pools =
      new std::map<std::pair<int, MathMode>, std::unique_ptr<Pool<Handle>>>();  // never freed
  std::lock_guard<std::mutex> lock(map_mutex);
  auto& pool = (*pools)[{device, mode}];
  if (!pool) pool = std::make_unique<Pool<Handle>>();
  return *pool;
}

cublasHandle_t create_handle(cublasHandle_t, MathMode mode) {
  cublasHandle_t h = nullptr;
  BRIGADE_CUBLAS_CHECK(cublasCreate(&h));
  // fp32: plain FP32, no TF32 tensor-core rounding, so results agree with gemm_tiled to float
  // rounding (cuBLAS's default too; saying it makes it independent of that). tf32: SGEMM may
  // run on tensor cores, its inputs rounded to TF32 (kernels/math_mode.h).
  BRIGADE_CUBLAS_CHECK(cublasSetMathMode(
      h, mode == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return h;
}

cudnnHandle_t create_handle(cudnnHandle_t, MathMode) {
  cudnnHandle_t h = nullptr;
  BRIGADE_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

// cublasCreate and cudnnCreate "allocate hardware resources on the host and device": a call
// CUDA refuses to a thread whose stream is capturing a graph (CudaGraph::capture begins in
// cudaStreamCaptureModeThreadLocal), and a lease inside a capture makes one when no handle is
// idle (stages sharing a GPU whose captures lease at once, more of them than ever did before).
// So a handle is made with the thread's capture interaction mode relaxed, as PyTorch and NCCL
// make their allocations during a capture: the allocation takes no part in the graph.
template <class Handle>
Handle create_relaxed(MathMode mode) {
  cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeRelaxed;
  BRIGADE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&thread_mode));
  try {
    const Handle h = create_handle(Handle{}, mode);
    BRIGADE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&thread_mode));  // the thread's again
    return h;
  } catch (...) {
    (void)cudaThreadExchangeStreamCaptureMode(&thread_mode);
    throw;
  }
}

// An idle handle of `device` (the current device) in `mode`, or a new one made on it.
template <class Handle>
Handle take(int device, MathMode mode) {
  Pool<Handle>& pool = pool_for<Handle>(device, mode);
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.idle.empty()) {
      Handle h = pool.idle.back();
      pool.idle.pop_back();
      return h;
    }
  }
  return create_relaxed<Handle>(mode);  // outside the lock: creating a handle is slow
}

template <class Handle>
void give_back(int device, MathMode mode, Handle h) {
  Pool<Handle>& pool = pool_for<Handle>(device, mode);
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.idle.push_back(h);
}

int cuda_index_of(const Stream& stream, const char* library) {
  BRIGADE_CHECK(stream.device().is_cuda(), library << " needs a CUDA stream, got "
                                                   << stream.str()
                                                   << " (the vendor paths are GPU-only)");
  return stream.device().index;
}

// The cuBLAS workspace of `stream`: made at its first call, kept by the stream, given back to
// the allocator when the stream is destroyed (Stream::kept).
std::shared_ptr<Block> workspace_of(const Stream& stream) {
  static const char key = 0;  // its address names the workspace among what a stream keeps
  return std::static_pointer_cast<Block>(stream.kept(&key, [&] {
    // A block holds its owner stream, and a stream that kept a block of its own would never be
    // destroyed: the device's default stream owns it (it lives forever and does no work on it),
    // and `stream` is declared its user, so the allocator knows whose work to wait for.
    const Stream owner = Stream::default_for(stream.device());
    std::shared_ptr<Block> block =
        Allocator::of(owner.device()).allocate(kCublasWorkspaceBytes, owner);
    block->record_stream(stream);
    return std::shared_ptr<void>(std::move(block));
  }));
}

}  // namespace

CublasLease::CublasLease(const Stream& stream)
    : device_(cuda_index_of(stream, "cuBLAS")), mode_(math_mode()) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_));  // a new handle belongs to this device
  handle_ = take<cublasHandle_t>(device_, mode_);
  try {
    BRIGADE_CUBLAS_CHECK(cublasSetStream(handle_, stream.cuda_handle()));
    // After the stream: cublasSetStream resets the workspace to cuBLAS's own pool.
    workspace_ = workspace_of(stream);
    BRIGADE_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_->data(), kCublasWorkspaceBytes));
  } catch (...) {
    give_back(device_, mode_, handle_);
    throw;
  }
}

CublasLease::~CublasLease() { give_back(device_, mode_, handle_); }

CudnnLease::CudnnLease(const Stream& stream) : device_(cuda_index_of(stream, "cuDNN")) {
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_));
  handle_ = take<cudnnHandle_t>(device_, MathMode::fp32);
  try {
    BRIGADE_CUDNN_CHECK(cudnnSetStream(handle_, stream.cuda_handle()));
  } catch (...) {
    give_back(device_, MathMode::fp32, handle_);
    throw;
  }
}

CudnnLease::~CudnnLease() { give_back(device_, MathMode::fp32, handle_); }

}  // namespace brigade::cuda::vendor

// Library handles of the vendor paths: each CUDA stream's own cuBLAS and cuDNN handles, and
// the lease a call holds one by.
//
// A cuBLAS or cuDNN handle belongs to the device that was current when it was created, and
// its stream is a setting of the handle (cublasSetStream / cudnnSetStream). A stream gets a
// handle of each library at its first call of that library — an idle one of its device's
// pool, or a new one — set to the stream once and kept by it (Stream::kept) for the stream's
// life. When the stream is destroyed, after its work and before the CUDA stream goes, each of
// its handles is set back to the default stream and returns to the pool, for the next stream.
// So no handle is ever set to a destroyed stream: changing a handle's stream may touch the old
// one (rocBLAS documents that it does), which would be memory freed with that stream — a host
// memory corruption that no check of Brigade's would see. (The emulated libraries refuse it:
// kernels/emu/vendor/library.h, set_stream.) And a call sets no stream: one call fewer per
// library call than a lease that points a pooled handle at its stream each time.
//
// A call leases its stream's handle for its duration: the lease makes the stream's device
// current and holds the handle's lock, so two host threads calling on one stream take turns
// (their work runs in the stream's order anyway), while the pipeline stages sharing a GPU,
// each with its own streams and host thread, call side by side. A stream's first call may
// come inside a CUDA graph capture; making a handle allocates device memory, which CUDA
// refuses to a capturing thread, so a handle is made in a CudaGraph::Relaxed scope
// (engine/cuda_graph.h), and one at a time in the process, as cuDNN asks (vendor_handles.cpp).
// (The stream's device stays the calling thread's current
// device afterwards, as after any engine call on a CUDA device.)
//
//   CublasLease blas(stream);
//   BRIGADE_CUBLAS_CHECK(cublasSgemm(blas.handle(), ...));
//
// cuBLAS also wants scratch memory (its workspace), and cublasSetStream resets it to cuBLAS's
// own pool. Each stream has one of its own, from Brigade's allocator (counted with the rest),
// set on its cuBLAS handles after their stream, and given back when the stream is destroyed,
// after its work. No two streams share one, so a GEMM's bits cannot depend on another stream's
// timing; one stream's calls reuse it in stream order, with no allocation per call (without
// the allocator's cache that was a cudaMalloc and a device-wide cudaFree per GEMM).
//
// A cuBLAS handle's math mode (kernels/math_mode.h) is set once, when it is made: the pools
// are per (device, math mode), a stream keeps a handle per mode, and a lease takes the one of
// the mode current at the call.
//
// Handles are never destroyed: they live as long as the process, and destroying them from a
// static destructor, after the CUDA runtime may have shut down, is a classic exit-time crash.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "engine/allocator.h"
#include "engine/stream.h"
#include "kernels/cuda/stream_workspace.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {

using cuda::kCublasWorkspaceBytes;  // the workspace a stream's calls share (stream_workspace.h)

class StreamHandles;  // what a stream keeps: its handles and workspace (vendor_handles.cpp)

class CublasLease {
 public:
  explicit CublasLease(const Stream& stream);
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  cublasHandle_t handle() const { return handle_; }
  void* workspace() const;  // the stream's

 private:
  std::shared_ptr<StreamHandles> handles_;
  std::unique_lock<std::recursive_mutex> lock_;  // the stream's cuBLAS handles', for the call
  cublasHandle_t handle_ = nullptr;
};

class CudnnLease {
 public:
  explicit CudnnLease(const Stream& stream);
  CudnnLease(const CudnnLease&) = delete;
  CudnnLease& operator=(const CudnnLease&) = delete;
  cudnnHandle_t handle() const { return handle_; }

 private:
  std::shared_ptr<StreamHandles> handles_;
  std::unique_lock<std::recursive_mutex> lock_;  // the stream's cuDNN handle's, for the call
  cudnnHandle_t handle_ = nullptr;
};

// cuDNN descriptors of one shape, made once per process and kept (like the handles): they are
// host objects that the calls only read, so every thread and device shares them, and a step
// creates none. `key` is the shape's sizes; Descriptors(s) builds them and check_output(s)
// refuses a shape cuDNN cannot express (then nothing is cached, and the next call refuses too).
template <class Descriptors, class Shape, size_t N>
const Descriptors& descriptors_for(const Shape& s, const std::array<int64_t, N>& key) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::array<int64_t, N>, std::unique_ptr<Descriptors>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Descriptors>& slot = (*cache)[key];
  if (!slot) {
    auto made = std::make_unique<Descriptors>(s);
    made->check_output(s);
    slot = std::move(made);
  }
  return *slot;
}

}  // namespace brigade::cuda::vendor

// Library handles of the vendor paths: a pool of cuBLAS and of cuDNN handles per device, and
// the lease a call holds one by.
//
// A cuBLAS or cuDNN handle belongs to the device that was current when it was created, and
// its stream is a setting of the handle (cublasSetStream / cudnnSetStream). A call leases a
// handle of its stream's device for its duration: the lease makes the stream's device
// current, takes an idle handle of that device (creating one when none is idle), points it at
// the stream, and gives it back when it goes out of scope. Pipeline stages that share a GPU
// each have their own host thread, and each lease holds its own handle, so their library
// calls run side by side instead of waiting for one lock; a device ends up with as many
// handles as calls it has had at once (one per stage thread on it), made once and reused by
// every later step. A lease inside a CUDA graph capture may be the first to need one more
// handle; making it allocates device memory, which CUDA refuses to a capturing thread, so a
// handle is made with the thread's capture interaction mode relaxed (vendor_handles.cpp).
// (The stream's device stays the calling thread's current device afterwards, as after any
// engine call on a CUDA device.)
//
//   CublasLease blas(stream);
//   BRIGADE_CUBLAS_CHECK(cublasSgemm(blas.handle(), ...));
//
// cuBLAS also wants scratch memory (its workspace), and cublasSetStream resets it to cuBLAS's
// own pool. Each stream has one of its own, from Brigade's allocator (counted with the rest),
// made at its first cuBLAS call and given back when the stream is destroyed, after its work
// (Stream::kept). No two streams share one, so a GEMM's bits cannot depend on another stream's
// timing; one stream's calls reuse it in stream order, with no allocation per call (without
// the allocator's cache that was a cudaMalloc and a device-wide cudaFree per GEMM).
//
// A cuBLAS handle's math mode (kernels/math_mode.h) is set once, when it is made: the pools
// are per (device, math mode), and a lease takes a handle of the mode current at the call.
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
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {

// Bytes of cuBLAS workspace a call gets: NVIDIA's recommendation for Hopper (32 MiB), which
// covers every earlier architecture's.
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;

class CublasLease {
 public:
  explicit CublasLease(const Stream& stream);
  ~CublasLease();  // gives the handle back to its device's pool
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  cublasHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_->data(); }  // the stream's

 private:
  int device_ = -1;
  MathMode mode_;  // math_mode() when leased: the handle's (a pool per device and mode)
  cublasHandle_t handle_ = nullptr;
  std::shared_ptr<Block> workspace_;  // kept by the lease's stream
};

class CudnnLease {
 public:
  explicit CudnnLease(const Stream& stream);
  ~CudnnLease();
  CudnnLease(const CudnnLease&) = delete;
  CudnnLease& operator=(const CudnnLease&) = delete;
  cudnnHandle_t handle() const { return handle_; }

 private:
  int device_ = -1;
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

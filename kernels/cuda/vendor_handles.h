// Library handles of the vendor paths, one per device, created at first use and cached.
//
// A cuBLAS or cuDNN handle belongs to the device that was current when it was created, and
// its stream is a setting of the handle (cublasSetStream / cudnnSetStream). So a call
// borrows its device's handle for its duration: the lease makes the stream's device current,
// locks the handle (host threads of different pipeline stages may share a device), points
// it at the stream, and unlocks when it goes out of scope. (The stream's device stays the
// calling thread's current device afterwards, as after any engine call on a CUDA device.)
//
//   CublasLease blas(stream);
//   BRIGADE_CUBLAS_CHECK(cublasSgemm(blas.handle(), ...));
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

#include "engine/stream.h"

namespace brigade::cuda::vendor {

class CublasLease {
 public:
  explicit CublasLease(const Stream& stream);
  cublasHandle_t handle() const { return handle_; }

 private:
  std::unique_lock<std::mutex> lock_;
  cublasHandle_t handle_ = nullptr;
};

class CudnnLease {
 public:
  explicit CudnnLease(const Stream& stream);
  cudnnHandle_t handle() const { return handle_; }

 private:
  std::unique_lock<std::mutex> lock_;
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

// What the tests of the emulated CUDA runtime share (cudart_test.cpp, hb_test.cpp): a stream
// and device memory on a given emulated GPU, each call checked.
#pragma once

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace brigade::testing {

// A new stream of `device` (made current): non-blocking unless `flags` says otherwise.
inline cudaStream_t stream_on(int device, unsigned flags = cudaStreamNonBlocking) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess);
  return s;
}

// `n` floats of fresh (poisoned) memory on `device`, which is left current.
inline float* device_floats(int device, size_t n) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(float)) == cudaSuccess);
  return static_cast<float*>(p);
}

// How the emulator names an allocation in its reports: "emulated cuda:1 memory 0x... (an
// allocation of 4 bytes)", as many bytes as asked (the emulated cudaMalloc does not round up).
inline std::string allocation_name(int device, const void* start, size_t bytes) {
  char address[32];
  std::snprintf(address, sizeof(address), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(start)));
  return "emulated cuda:" + std::to_string(device) + " memory " + address + " (an allocation of " +
         std::to_string(bytes) + " bytes)";
}

}  // namespace brigade::testing

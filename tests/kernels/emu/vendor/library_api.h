// What the tests of the emulated cuBLAS and cuDNN through NVIDIA's API share
// (handle_rules_test.cpp, vendor_libraries_test.cpp): streams, device buffers, handles and
// tensor descriptors made with the CUDA, cuBLAS and cuDNN calls themselves, each checked.
#pragma once

#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>
#include <vector>

namespace brigade::test::vendor_api {

inline cudaStream_t non_blocking(int device) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  return s;
}

// A device copy of `host` on `device` (fresh cudaMalloc memory is NaN; this overwrites it).
inline float* upload(int device, const std::vector<float>& host) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  // A pageable cudaMemcpy lands only when something is ordered after it (kernels/emu/cudart):
  // the non-blocking streams below are not, so wait for it here.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return static_cast<float*>(p);
}

// `n` floats of `p`, after everything `stream` holds.
inline std::vector<float> download(const float* p, size_t n, cudaStream_t stream) {
  std::vector<float> host(n);
  REQUIRE(cudaMemcpyAsync(host.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  return host;
}

inline bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline cublasHandle_t blas_on(int device, cudaStream_t stream) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cublasHandle_t h = nullptr;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  if (stream) REQUIRE(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS);
  return h;
}

inline cudnnHandle_t dnn_on(int device, cudaStream_t stream) {
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  cudnnHandle_t h = nullptr;
  REQUIRE(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS);
  if (stream) REQUIRE(cudnnSetStream(h, stream) == CUDNN_STATUS_SUCCESS);
  return h;
}

inline cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t t = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w) == CUDNN_STATUS_SUCCESS);
  return t;
}

inline const float kOne = 1.0f, kZero = 0.0f;  // alpha and beta

}  // namespace brigade::test::vendor_api

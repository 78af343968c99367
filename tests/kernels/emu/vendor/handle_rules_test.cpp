// Emulated cuBLAS and cuDNN (kernels/emu/vendor) through NVIDIA's API: the rules of a handle
// and its stream. A handle belongs to the device current at its create, and so must its
// stream; a call runs on the handle's stream, and one never set is refused; a handle's stream
// is changed only while its old stream exists. Each rule is quoted in kernels/emu/vendor/
// README.md. Emulated builds only, in test_vendor_emu (cuda:0 and cuda:1; cuda:2 is
// vendor_libraries_test.cpp's to fault).
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_emulation.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>
#include <vector>

#include "tests/kernels/emu/vendor/library_api.h"
#include "tests/support/deadline.h"

using brigade::testing::Deadline;
using namespace brigade::test::vendor_api;

TEST_CASE("a handle belongs to the device current at its create, and so must its stream") {
  Deadline deadline("handle and stream devices");
  cudaStream_t s0 = non_blocking(0), s1 = non_blocking(1);
  float* a = upload(0, {1, 2, 3, 4});
  float* c = upload(0, {0, 0, 0, 0});
  cublasHandle_t blas = blas_on(0, s1);  // a stream of cuda:1 on a cuda:0 handle
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED),
             "the handle belongs to cuda:0 and its stream to emulated cuda:1"));
  REQUIRE(cublasSetStream(blas, s0) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);  // the handle's device is no longer current
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED), "current device is cuda:1"));
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_SUCCESS);
  // Column-major [1 3; 2 4] squared is [7 15; 10 22].
  CHECK(download(c, 4, s0) == std::vector<float>{7, 10, 15, 22});

  cudnnHandle_t dnn = dnn_on(0, s1);
  cudnnTensorDescriptor_t t = tensor(1, 1, 2, 2);
  CHECK(cudnnAddTensor(dnn, &kOne, t, a, &kOne, t, c) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "its stream to emulated cuda:1"));
  CHECK(cublasDestroy(blas) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_NOT_INITIALIZED);  // a destroyed handle is refused by name
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), "destroyed"));
  CHECK(cudnnDestroy(dnn) == CUDNN_STATUS_SUCCESS);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
}

TEST_CASE("a call runs on the handle's stream; a handle whose stream was never set is refused") {
  Deadline deadline("the handle's stream");
  cudaStream_t mine = non_blocking(0), other = non_blocking(0);
  float* a = upload(0, {1, 2, 3, 4});
  float* c = upload(0, {-1, -1, -1, -1});
  cublasHandle_t blas = blas_on(0, nullptr);
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "stream was never set"));
  // A handle left pointing at another stream runs there: while `other` is held, the product
  // is pending on it, and `mine` has nothing. (Reading c on `mine` now would be a race, which
  // the emulated runtime's happens-before check stops: hb_test.cpp.)
  REQUIRE(cublasSetStream(blas, other) == CUBLAS_STATUS_SUCCESS);
  {
    brigade::emu::gpu::StreamHold hold(other);
    CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(cudaStreamQuery(mine) == cudaSuccess);
    CHECK(cudaStreamQuery(other) == cudaErrorNotReady);
    (void)cudaGetLastError();
  }
  CHECK(download(c, 4, other) == std::vector<float>{7, 10, 15, 22});

  cudnnHandle_t dnn = dnn_on(0, nullptr);
  cudnnTensorDescriptor_t t = tensor(1, 1, 2, 2);
  CHECK(cudnnAddTensor(dnn, &kOne, t, a, &kOne, t, c) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "stream was never set"));
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
}

// The count of calls (cuda_emulation.h's CallCounts): every library call by its exported name
// (cublasSgemm is cuBLAS's macro for cublasSgemm_v2), and as a library call only when it put
// work on a stream; a refused one did not.
// Changing a handle's stream may touch the old stream (rocBLAS documents that it does: set the
// default stream before destroying a stream), and a destroyed stream's memory is gone: so a
// handle still set to a stream destroyed since may not be given another (stricter than a GPU,
// where it is undefined). Set to the default stream first, it may; a new stream at the old
// one's address is no excuse.
TEST_CASE("a handle still set to a destroyed stream may not be given another one") {
  Deadline deadline("a handle set to a destroyed stream");
  cudaStream_t gone = non_blocking(0);
  cublasHandle_t blas = blas_on(0, gone);
  cudnnHandle_t dnn = dnn_on(0, gone);
  REQUIRE(cudaStreamDestroy(gone) == cudaSuccess);
  cudaStream_t next = non_blocking(0);  // may reuse the address
  CHECK(cublasSetStream(blas, next) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED),
             "still set to a stream destroyed since"));
  CHECK(cudnnSetStream(dnn, next) == CUDNN_STATUS_EXECUTION_FAILED);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_EXECUTION_FAILED),
             "still set to a stream destroyed since"));

  cudaStream_t kept = non_blocking(0);
  cublasHandle_t reset = blas_on(0, kept);
  cudnnHandle_t reset_dnn = dnn_on(0, kept);
  REQUIRE(cublasSetStream(reset, nullptr) == CUBLAS_STATUS_SUCCESS);  // before the destroy
  REQUIRE(cudnnSetStream(reset_dnn, nullptr) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudaStreamDestroy(kept) == cudaSuccess);
  CHECK(cublasSetStream(reset, next) == CUBLAS_STATUS_SUCCESS);
  CHECK(cudnnSetStream(reset_dnn, next) == CUDNN_STATUS_SUCCESS);
  for (cublasHandle_t h : {blas, reset}) CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  for (cudnnHandle_t h : {dnn, reset_dnn}) CHECK(cudnnDestroy(h) == CUDNN_STATUS_SUCCESS);
  CHECK(cudaStreamDestroy(next) == cudaSuccess);
}

// Emulated cuBLAS and cuDNN (kernels/emu/vendor), rule by rule, through NVIDIA's API itself:
// the rules of the calls (handle_rules_test.cpp has those of handles and their streams). Each
// case is a rule of the libraries (kernels/emu/vendor/README.md quotes the documentation)
// and checks that the emulation fails, or answers, where a GPU would — or, where a GPU would
// silently race, fails every time. Emulated builds only, with 3 GPUs of 64 MiB
// (tests/kernels/emu/meson.build). cuda:2 is faulted on purpose by the last case: a fault is
// sticky for the process, as on a GPU, so nothing before it uses cuda:2.
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_emulation.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/error.h"
#include "tests/kernels/emu/vendor/library_api.h"
#include "tests/support/deadline.h"

using brigade::testing::Deadline;
using namespace brigade::test::vendor_api;

namespace {

// A 1-channel 4x4 input, one 3x3 filter, stride 1, no padding: y is (1, 1, 2, 2).
struct SmallConv {
  cudnnTensorDescriptor_t x = tensor(1, 1, 4, 4), y = tensor(1, 1, 2, 2);
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  SmallConv() {
    REQUIRE(cudnnCreateFilterDescriptor(&w) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, 3, 3) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
  }
};

}  // namespace

TEST_CASE("library calls are counted by name, and as library calls when they enqueue work") {
  Deadline deadline("library call counts");
  cudaStream_t s = non_blocking(0);
  float* a = upload(0, {1, 2, 3, 4});
  float* c = upload(0, {0, 0, 0, 0});
  cublasHandle_t unset = blas_on(0, nullptr), blas = blas_on(0, s);
  const brigade::emu::gpu::CallCounts before = brigade::emu::gpu::call_counts();
  CHECK(cublasSgemm(unset, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
        CUBLAS_STATUS_INVALID_VALUE);
  for (int i = 0; i < 2; ++i)
    REQUIRE(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
            CUBLAS_STATUS_SUCCESS);
  cudnnHandle_t dnn = dnn_on(0, s);
  cudnnTensorDescriptor_t t = tensor(1, 1, 2, 2);  // cudnnCreateTensorDescriptor, cudnnSet...
  REQUIRE(cudnnAddTensor(dnn, &kOne, t, a, &kOne, t, c) == CUDNN_STATUS_SUCCESS);
  const brigade::emu::gpu::CallCounts d = brigade::emu::gpu::call_counts().since(before);
  CHECK(d.by_entry_point.at("cublasSgemm_v2") == 3);
  CHECK(d.by_entry_point.at("cudnnAddTensor") == 1);
  CHECK(d.by_entry_point.at("cudnnSetTensor4dDescriptor") == 1);
  CHECK(d.library_calls == 3);  // two GEMMs and the addition
  CHECK(d.kernel_launches == 0);
  CHECK(download(c, 4, s) == std::vector<float>{8, 12, 18, 26});  // the product, plus a
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
}

// cudnnConvolutionBiasActivationForward: y = act(alpha1 · conv(x, w) + alpha2 · z + bias) in one
// call, the bits of the three calls it replaces (convolution, cudnnAddTensor, ReLU); the
// identity activation only with IMPLICIT_PRECOMP_GEMM ("The cudnnConvolutionBiasActivationForward()
// function must use CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM", cudnnActivationMode_t);
// z unread when alpha2 is 0; a bias that is not (1, K, 1, 1) refused.
TEST_CASE("the fused convolution + bias + activation: the three calls' bits, and cuDNN's rules") {
  Deadline deadline("fused convolution");
  cudaStream_t s = non_blocking(0);
  cudnnHandle_t dnn = dnn_on(0, s);
  std::vector<float> xs(16), ws(18);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 5) - 1.5f;
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  float* x = upload(0, xs);
  float* w = upload(0, ws);
  float* bias = upload(0, {0.5f, -40.0f});  // the second channel all below 0: ReLU zeroes it
  float* y3 = upload(0, std::vector<float>(8, NAN));
  float* y1 = upload(0, std::vector<float>(8, NAN));  // also z: NaN, and unread with alpha2 = 0
  float* ws_bytes = upload(0, std::vector<float>(8, 0.0f));  // IMPLICIT_PRECOMP_GEMM's workspace
  cudnnTensorDescriptor_t xd = tensor(1, 1, 4, 4), yd = tensor(1, 2, 2, 2), bd = tensor(1, 2, 1, 1);
  cudnnFilterDescriptor_t wd = nullptr;
  REQUIRE(cudnnCreateFilterDescriptor(&wd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 2, 1, 3, 3) == CUDNN_STATUS_SUCCESS);
  cudnnConvolutionDescriptor_t conv = nullptr;
  REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
  cudnnActivationDescriptor_t relu = nullptr, identity = nullptr;
  REQUIRE(cudnnCreateActivationDescriptor(&relu) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnCreateActivationDescriptor(&identity) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetActivationDescriptor(identity, CUDNN_ACTIVATION_IDENTITY, CUDNN_PROPAGATE_NAN, 0.0) == CUDNN_STATUS_SUCCESS);
  const auto gemm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  const auto precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;

  // Three calls, then one: the same bits; the ReLU runs with IMPLICIT_GEMM too.
  REQUIRE(cudnnConvolutionForward(dnn, &kOne, xd, x, wd, w, conv, gemm, nullptr, 0, &kZero, yd, y3) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnAddTensor(dnn, &kOne, bd, bias, &kOne, yd, y3) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnActivationForward(dnn, relu, &kOne, yd, y3, &kZero, yd, y3) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnConvolutionBiasActivationForward(dnn, &kOne, xd, x, wd, w, conv, gemm, nullptr, 0, &kZero,
                                                yd, y1, bd, bias, relu, yd, y1) == CUDNN_STATUS_SUCCESS);
  const std::vector<float> three = download(y3, 8, s), fused = download(y1, 8, s);
  CHECK(std::memcmp(three.data(), fused.data(), 8 * sizeof(float)) == 0);
  CHECK(fused[4] == 0.0f);  // channel 1: below zero before the ReLU
  CHECK(fused[0] > 0.0f);
  // The identity: refused with IMPLICIT_GEMM, at the call, as cuDNN refuses it; with
  // IMPLICIT_PRECOMP_GEMM it is the convolution plus the bias, and alpha2 = 1 adds z.
  CHECK(cudnnConvolutionBiasActivationForward(dnn, &kOne, xd, x, wd, w, conv, gemm, nullptr, 0, &kZero,
                                              yd, y1, bd, bias, identity, yd, y1) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "IMPLICIT_PRECOMP_GEMM"));
  REQUIRE(cudnnConvolutionForward(dnn, &kOne, xd, x, wd, w, conv, gemm, nullptr, 0, &kZero, yd, y3) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnAddTensor(dnn, &kOne, bd, bias, &kOne, yd, y3) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnConvolutionBiasActivationForward(dnn, &kOne, xd, x, wd, w, conv, precomp, ws_bytes,
                                                8 * sizeof(float), &kOne, yd, y3, bd, bias, identity,
                                                yd, y1) == CUDNN_STATUS_SUCCESS);
  const std::vector<float> sum = download(y3, 8, s), with_z = download(y1, 8, s);
  for (size_t i = 0; i < 8; ++i) CHECK(with_z[i] == sum[i] + sum[i]);  // conv + bias, + z (= it)
  // A bias of one value for both channels is not (1, K, 1, 1).
  cudnnTensorDescriptor_t one = tensor(1, 1, 1, 1);
  CHECK(cudnnConvolutionBiasActivationForward(dnn, &kOne, xd, x, wd, w, conv, gemm, nullptr, 0, &kZero,
                                              yd, y1, one, bias, relu, yd, y1) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "is not (1, 2, 1, 1)"));
  for (float* p : {x, w, bias, y3, y1, ws_bytes}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a cuBLAS workspace is 256-byte aligned") {
  cublasHandle_t blas = blas_on(0, non_blocking(0));
  void* ws = nullptr;
  REQUIRE(cudaMalloc(&ws, 1024) == cudaSuccess);
  CHECK(cublasSetWorkspace(blas, static_cast<char*>(ws) + 4, 512) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(says(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "not aligned to 256 bytes"));
  CHECK(cublasSetWorkspace(blas, ws, 1024) == CUBLAS_STATUS_SUCCESS);
  CHECK(cudaFree(ws) == cudaSuccess);
}

TEST_CASE("alpha and beta: beta = 0 overwrites garbage, NaN included; beta = 1 accumulates") {
  Deadline deadline("alpha and beta");
  cudaStream_t s = non_blocking(0);
  cublasHandle_t blas = blas_on(0, s);
  float* a = upload(0, {1, 2, 3, 4});
  float* c = upload(0, {NAN, NAN, NAN, NAN});
  REQUIRE(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kOne, a, 2, a, 2, &kZero, c, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(download(c, 4, s) == std::vector<float>{7, 10, 15, 22});
  const float two = 2.0f;  // C = 2 · Aᵀ·A + 1 · C
  REQUIRE(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &two, a, 2, a, 2, &kOne, c, 2) ==
          CUBLAS_STATUS_SUCCESS);
  // Aᵀ·A = [5 11; 11 25] (column-major 5, 11, 11, 25).
  CHECK(download(c, 4, s) == std::vector<float>{7 + 10, 10 + 22, 15 + 22, 22 + 50});

  cudnnHandle_t dnn = dnn_on(0, s);
  SmallConv k;
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  float* dx = upload(0, x);
  float* dw = upload(0, {1, 0, 0, 0, 1, 0, 0, 0, 1});  // the diagonal: y = x[p][q] + x[p+1][q+1] + x[p+2][q+2]
  float* dy = upload(0, {NAN, NAN, NAN, NAN});
  REQUIRE(cudnnConvolutionForward(dnn, &kOne, k.x, dx, k.w, dw, k.conv,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &kZero,
                                  k.y, dy) == CUDNN_STATUS_SUCCESS);
  CHECK(download(dy, 4, s) == std::vector<float>{0 + 5 + 10, 1 + 6 + 11, 4 + 9 + 14, 5 + 10 + 15});
  // Backward-filter with beta = 1 adds to dw: dy = 1 everywhere gives each w cell the sum of
  // the 2x2 block of x it meets.
  float* ones = upload(0, {1, 1, 1, 1});
  REQUIRE(cudnnConvolutionBackwardFilter(dnn, &kOne, k.x, dx, k.y, ones, k.conv,
                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, nullptr, 0, &kOne,
                                         k.w, dw) == CUDNN_STATUS_SUCCESS);
  CHECK(download(dw, 9, s) == std::vector<float>{1 + 10, 14, 18, 26, 1 + 30, 34, 42, 46, 1 + 50});
}

TEST_CASE("a workspace smaller than the query said is refused; descriptors are created, set, alive, consistent") {
  Deadline deadline("workspace and descriptors");
  cudaStream_t s = non_blocking(0);
  cudnnHandle_t dnn = dnn_on(0, s);
  SmallConv k;
  float* x = upload(0, std::vector<float>(16, 1.0f));
  float* w = upload(0, std::vector<float>(9, 1.0f));
  float* y = upload(0, std::vector<float>(4, 0.0f));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(dnn, k.x, k.w, k.conv, k.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                 &count, perf) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 2);
  size_t bytes = 0;
  REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(dnn, k.x, k.w, k.conv, k.y, perf[0].algo, &bytes) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(bytes > 0);  // the emulation's first forward algorithm needs one
  void* ws = nullptr;
  REQUIRE(cudaMalloc(&ws, bytes) == cudaSuccess);
  CHECK(cudnnConvolutionForward(dnn, &kOne, k.x, x, k.w, w, k.conv, perf[0].algo, ws, bytes - 1,
                                &kZero, k.y, y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "needs " + std::to_string(bytes)));
  CHECK(cudnnConvolutionForward(dnn, &kOne, k.x, x, k.w, w, k.conv, perf[0].algo, ws, bytes,
                                &kZero, k.y, y) == CUDNN_STATUS_SUCCESS);
  CHECK(download(y, 4, s) == std::vector<float>{9, 9, 9, 9});

  // A y descriptor of another shape than the convolution's output.
  cudnnTensorDescriptor_t wrong = tensor(1, 1, 3, 3);
  CHECK(cudnnConvolutionForward(dnn, &kOne, k.x, x, k.w, w, k.conv,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &kZero,
                                wrong, y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "is not the convolution's (1, 1, 2, 2)"));
  // Created but never set, then destroyed.
  cudnnTensorDescriptor_t unset = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&unset) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnAddTensor(dnn, &kOne, unset, x, &kOne, k.y, y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "aDesc (a tensor descriptor) was never set"));
  REQUIRE(cudnnDestroyTensorDescriptor(k.y) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnConvolutionForward(dnn, &kOne, k.x, x, k.w, w, k.conv,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &kZero, k.y,
                                y) == CUDNN_STATUS_BAD_PARAM);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "was destroyed"));
  CHECK(cudnnDestroyTensorDescriptor(k.y) == CUDNN_STATUS_BAD_PARAM);  // twice
  CHECK(cudaFree(ws) == cudaSuccess);
}

TEST_CASE("BRIGADE_EMU_CUDNN_REFUSE_FIRST=1: the first algorithm of each list fails at execution") {
  Deadline deadline("refused algorithms");
  cudaStream_t s = non_blocking(0);
  cudnnHandle_t dnn = dnn_on(0, s);
  SmallConv k;
  float* x = upload(0, std::vector<float>(16, 1.0f));
  float* w = upload(0, std::vector<float>(9, 1.0f));
  float* y = upload(0, std::vector<float>(4, 0.0f));
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, k.w, k.y, k.conv, k.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                      &count, perf) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 2);
  size_t bytes = 0;
  REQUIRE(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, k.w, k.y, k.conv, k.x, perf[0].algo, &bytes) ==
          CUDNN_STATUS_SUCCESS);
  void* ws = nullptr;
  REQUIRE(cudaMalloc(&ws, bytes) == cudaSuccess);
  REQUIRE(setenv("BRIGADE_EMU_CUDNN_REFUSE_FIRST", "1", 1) == 0);
  CHECK(cudnnConvolutionBackwardData(dnn, &kOne, k.w, w, k.y, y, k.conv, perf[0].algo, ws, bytes,
                                     &kZero, k.x, x) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(says(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "BRIGADE_EMU_CUDNN_REFUSE_FIRST"));
  CHECK(cudnnConvolutionBackwardData(dnn, &kOne, k.w, w, k.y, y, k.conv, perf[1].algo, ws, bytes,
                                     &kZero, k.x, x) == CUDNN_STATUS_SUCCESS);
  REQUIRE(unsetenv("BRIGADE_EMU_CUDNN_REFUSE_FIRST") == 0);
  CHECK(cudnnConvolutionBackwardData(dnn, &kOne, k.w, w, k.y, y, k.conv, perf[0].algo, ws, bytes,
                                     &kZero, k.x, x) == CUDNN_STATUS_SUCCESS);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaFree(ws) == cudaSuccess);
}

TEST_CASE("max pooling: the NaN option is honoured; backward routes a tie to the first cell, every time") {
  Deadline deadline("pooling");
  cudaStream_t s = non_blocking(0);
  cudnnHandle_t dnn = dnn_on(0, s);
  cudnnTensorDescriptor_t xd = tensor(1, 1, 2, 4), yd = tensor(1, 1, 1, 2);
  // Two 2x2 windows: [1 NaN; 0 -1] and a tie [3 3; 3 2].
  float* x = upload(0, {1, NAN, 3, 3, 0, -1, 3, 2});
  float* y = upload(0, {0, 0});
  for (auto nan : {CUDNN_PROPAGATE_NAN, CUDNN_NOT_PROPAGATE_NAN}) {
    cudnnPoolingDescriptor_t pool = nullptr;
    REQUIRE(cudnnCreatePoolingDescriptor(&pool) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetPooling2dDescriptor(pool, CUDNN_POOLING_MAX_DETERMINISTIC, nan, 2, 2, 0, 0, 2, 2) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnPoolingForward(dnn, pool, &kOne, xd, x, &kZero, yd, y) == CUDNN_STATUS_SUCCESS);
    const std::vector<float> got = download(y, 2, s);
    CHECK(std::isnan(got[0]) == (nan == CUDNN_PROPAGATE_NAN));
    if (nan == CUDNN_NOT_PROPAGATE_NAN) CHECK(got[0] == 1.0f);
    CHECK(got[1] == 3.0f);
    if (nan == CUDNN_NOT_PROPAGATE_NAN) {
      float* dy = upload(0, {10, 20});
      float* dx = upload(0, std::vector<float>(8, NAN));  // beta = 0: overwritten
      for (int run = 0; run < 2; ++run) {
        REQUIRE(cudnnPoolingBackward(dnn, pool, &kOne, yd, y, yd, dy, xd, x, &kZero, xd, dx) ==
                CUDNN_STATUS_SUCCESS);
        CHECK(download(dx, 8, s) == std::vector<float>{10, 0, 20, 0, 0, 0, 0, 0});
      }
    }
  }
}

TEST_CASE("status texts are NVIDIA's; BRIGADE_*_CHECK prints them with the emulation's reason") {
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_ALLOC_FAILED)) == "the resource allocation failed");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_INTERNAL_ERROR)) == "CUDNN_STATUS_INTERNAL_ERROR");
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudnnTensorDescriptor_t t = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS);
  try {
    BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 1, 1, 1));
    FAIL("no throw");
  } catch (const brigade::Error& e) {
    INFO(e.what());
    CHECK(says(e.what(), "cuDNN"));
    CHECK(says(e.what(), "cudnnSetTensor4dDescriptor"));
    CHECK(says(e.what(), "CUDNN_STATUS_BAD_PARAM [emulated GPU: cudnnSetTensor4dDescriptor: (0, 1, 1, 1)"));
  }
}

// Last: faults cuda:2 for the rest of the process.
TEST_CASE("a call whose buffer runs past its allocation faults the GPU, as the memory unit would") {
  Deadline deadline("out of bounds");
  cudaStream_t s = non_blocking(2);
  cublasHandle_t blas = blas_on(2, s);
  float* a = upload(2, std::vector<float>(9, 1.0f));
  // 64 floats (256 bytes: cudaMalloc's granule, so the allocation ends right there); a 9x9 C
  // needs 81.
  float* c = upload(2, std::vector<float>(64, 0.0f));
  CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 9, 9, 1, &kOne, a, 9, a, 1, &kZero, c, 9) ==
        CUBLAS_STATUS_SUCCESS);  // asynchronous: the fault comes at the next synchronising call
  CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress);
  CHECK(says(cudaGetErrorString(cudaErrorIllegalAddress), "C ("));
  CHECK(says(cudaGetErrorString(cudaErrorIllegalAddress), "runs past the end of its allocation"));
}

// Emulated cuBLAS's cublasGemmEx (kernels/emu/vendor/cublas.cpp) through NVIDIA's API: A and B
// in bfloat16 (CUDA_R_16BF), C in float, CUBLAS_COMPUTE_32F — precision bf16's GEMM — against
// a host loop over the widened values, every transpose; beta's two rules; the bf16 operands'
// extents in two-byte elements; and the combinations cuBLAS refuses, or that it takes and the
// emulation does not, each refused by name. Emulated builds only (3 GPUs, meson.build here);
// cuda:0 only: cuda:2 is faulted on purpose by vendor_libraries_test.cpp.
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/deadline.h"

namespace {

// bf16's bits of a float that is a bf16 value (its low 16 bits zero), and back.
uint16_t gemm_ex_bits(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  REQUIRE((u & 0xFFFFu) == 0u);  // the test's values are bf16 values
  return static_cast<uint16_t>(u >> 16);
}
float gemm_ex_widen(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// n bf16 values, varied in sign and magnitude, none of them exact in fewer than 8 bits.
std::vector<uint16_t> gemm_ex_values(int64_t n, uint32_t seed) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    const float mantissa = 1.0f + static_cast<float>((x >> 9) & 0x7Fu) / 128.0f;  // 8 bits
    const float scale = std::ldexp(1.0f, static_cast<int>((x >> 20) % 7) - 3);
    b = gemm_ex_bits(((x >> 28) & 1u ? -mantissa : mantissa) * scale);
  }
  return v;
}

template <class T>
T* gemm_ex_upload(const std::vector<T>& host) {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // a pageable copy lands when waited for
  return static_cast<T*>(p);
}

std::vector<float> gemm_ex_download(const float* p, size_t n, cudaStream_t stream) {
  std::vector<float> host(n);
  REQUIRE(cudaMemcpyAsync(host.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost, stream) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  return host;
}

struct GemmExSetup {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  GemmExSetup() {
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS);
  }
};

bool gemm_ex_says(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const float kGemmExOne = 1.0f, kGemmExZero = 0.0f;

}  // namespace

TEST_CASE("cublasGemmEx, bf16 A and B, float C: a float sum of exact products, every transpose") {
  brigade::testing::Deadline deadline("cublasGemmEx bf16");
  GemmExSetup g;
  const int m = 7, n = 5, k = 33;  // column-major C (m, n); op(A) (m, k), op(B) (k, n)
  const std::vector<uint16_t> a = gemm_ex_values(m * k, 1), b = gemm_ex_values(k * n, 2);
  uint16_t* da = gemm_ex_upload(a);
  uint16_t* db = gemm_ex_upload(b);
  const std::vector<float> c0 = [&] {
    std::vector<float> v(static_cast<size_t>(m * n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 10.0f;
    return v;
  }();
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(ta);
      CAPTURE(tb);
      const int lda = ta ? k : m, ldb = tb ? n : k;  // the same data, read as op() says
      auto op_a = [&](int i, int l) {
        return gemm_ex_widen(a[static_cast<size_t>(ta ? l + i * lda : i + l * lda)]);
      };
      auto op_b = [&](int l, int j) {
        return gemm_ex_widen(b[static_cast<size_t>(tb ? j + l * ldb : l + j * ldb)]);
      };
      // The host's C = 2 · op(A) · op(B) + beta · C0, the products exact in float (8 + 8
      // significant bits), summed in float in the order of k, as the emulation sums them.
      for (const float beta : {0.0f, 1.0f}) {
        CAPTURE(beta);
        std::vector<float> want(c0.size());
        bool exact = true;  // every product, as the rule says
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < m; ++i) {
            float acc = 0.0f;
            for (int l = 0; l < k; ++l) {
              const float product = op_a(i, l) * op_b(l, j);
              exact = exact && static_cast<double>(product) == static_cast<double>(op_a(i, l)) *
                                                                  static_cast<double>(op_b(l, j));
              acc += product;
            }
            const size_t at = static_cast<size_t>(i + j * m);
            want[at] = beta == 0.0f ? 2.0f * acc : 2.0f * acc + beta * c0[at];
          }
        CHECK(exact);
        // beta = 0: C starts as NaN and is not read; beta = 1: it starts as C0.
        float* dc = gemm_ex_upload(beta == 0.0f ? std::vector<float>(c0.size(), NAN) : c0);
        const float alpha = 2.0f;
        REQUIRE(cublasGemmEx(g.blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             m, n, k, &alpha, da, CUDA_R_16BF, lda, db, CUDA_R_16BF, ldb, &beta,
                             dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
                CUBLAS_STATUS_SUCCESS);
        CHECK(gemm_ex_download(dc, want.size(), g.stream) == want);
        REQUIRE(cudaFree(dc) == cudaSuccess);
      }
    }
}

TEST_CASE("cublasGemmEx reads a bf16 operand as two-byte elements, and is counted by name") {
  brigade::testing::Deadline deadline("cublasGemmEx extents");
  GemmExSetup g;
  // A (128, 1) bf16 fills one 256-byte allocation exactly (cudaMalloc's granule, so nothing
  // lies past it): read as floats it would run past its end and fault the GPU.
  const int m = 128, n = 2, k = 1;
  uint16_t* da = gemm_ex_upload(gemm_ex_values(m * k, 3));
  uint16_t* db = gemm_ex_upload(gemm_ex_values(k * n, 4));
  float* dc = gemm_ex_upload(std::vector<float>(static_cast<size_t>(m * n), 0.0f));
  const auto before = brigade::emu::gpu::call_counts();
  CHECK(cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &kGemmExOne, da, CUDA_R_16BF, m,
                     db, CUDA_R_16BF, k, &kGemmExZero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) == CUBLAS_STATUS_SUCCESS);
  CHECK(cudaStreamSynchronize(g.stream) == cudaSuccess);
  const auto added = brigade::emu::gpu::call_counts().since(before);
  CHECK(added.by_entry_point.at("cublasGemmEx") == 1u);
  CHECK(added.library_calls == 1u);
}

TEST_CASE("cublasGemmEx refuses what cuBLAS refuses, and what the emulation does not run") {
  GemmExSetup g;
  uint16_t* a = gemm_ex_upload(gemm_ex_values(4, 5));
  float* c = gemm_ex_upload(std::vector<float>(4, 0.0f));
  const auto call = [&](cudaDataType at, cudaDataType bt, cudaDataType ct,
                        cublasComputeType_t compute, cublasGemmAlgo_t algo, int m = 2,
                        const float* alpha = &kGemmExOne) {
    return cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 2, 2, alpha, a, at, 2, a, bt, 2,
                        &kGemmExZero, c, ct, 2, compute, algo);
  };
  const auto text = [] { return std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)); };
  // "CUBLAS_STATUS_NOT_SUPPORTED: the combination of the parameters Atype, Btype and Ctype or
  // the algorithm, algo is not supported"
  CHECK(call(CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm_ex_says(text(), "A and B must have one type"));
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm_ex_says(text(), "not a combination cuBLAS supports"));
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
             CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm_ex_says(text(), "not a combination cuBLAS supports"));
  // bf16 in, bf16 out is cuBLAS's (PSEUDO-style rounding of C): valid, and not emulated.
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm_ex_says(text(), "valid for cuBLAS, not emulated"));
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F,
             static_cast<cublasGemmAlgo_t>(50)) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(gemm_ex_says(text(), "algorithm 50"));
  // "CUBLAS_STATUS_INVALID_VALUE: the parameters m, n, k < 0", or a null alpha.
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, -1) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(call(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, 2,
             nullptr) == CUBLAS_STATUS_INVALID_VALUE);
  // A handle whose stream was never set is refused, as for SGEMM.
  cublasHandle_t unset = nullptr;
  REQUIRE(cublasCreate(&unset) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasGemmEx(unset, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &kGemmExOne, a, CUDA_R_16BF, 2, a,
                     CUDA_R_16BF, 2, &kGemmExZero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  // Nothing refused ran: C is as it was.
  CHECK(gemm_ex_download(c, 4, g.stream) == std::vector<float>(4, 0.0f));
}

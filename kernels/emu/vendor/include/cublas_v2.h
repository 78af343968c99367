// cuBLAS as Brigade calls it, for emulated GPUs (-Dcuda=emulated).
//
// In an emulated build this header stands where the toolkit's <cublas_v2.h> stands in a native
// one, so kernels/cuda/cublas_gemm.cpp and vendor_handles.cpp compile unchanged. Names, numeric
// values and signatures are NVIDIA's (cuBLAS 12/13, cublas_api.h), for the calls Brigade
// makes and no others: a call Brigade starts to make that is missing here is a compile error
// of the emulated build, not a silent gap. kernels/emu/vendor/cublas.cpp implements them
// (kernels/emu/vendor/README.md has the rules).
#pragma once

#include <cstddef>

#include "cuda_runtime_api.h"

extern "C" {

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
} cublasMath_t;

typedef struct cublasContext* cublasHandle_t;

// library_types.h's element types (the toolkit's cublas_api.h includes it), those a GEMM of
// Brigade's names, and the half type beside them for the checks of the combinations.
typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
} cudaDataType;

typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
} cublasComputeType_t;

// The algorithms: the default (cuBLAS's heuristics), the numbered ones ALGO0 .. ALGO23, and
// their deprecated tensor-op twins (DEFAULT_TENSOR_OP = 99, ALGO0_TENSOR_OP .. 115).
typedef enum {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_ALGO0 = 0,
  CUBLAS_GEMM_ALGO23 = 23,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
  CUBLAS_GEMM_ALGO0_TENSOR_OP = 100,
  CUBLAS_GEMM_ALGO15_TENSOR_OP = 115,
} cublasGemmAlgo_t;

const char* cublasGetStatusString(cublasStatus_t status);

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc);

// C = alpha · op(A) · op(B) + beta · C with the element types named; alpha and beta of the
// compute type's scale type (float for CUBLAS_COMPUTE_32F).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);

}  // extern "C"

// cublas_v2.h's names for the _v2 entry points.
#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasSgemm cublasSgemm_v2

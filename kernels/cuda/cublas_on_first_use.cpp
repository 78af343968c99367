// The cuBLAS functions Brigade calls, defined in the program and forwarded to libcublas, which
// the first of them opens (cublas_on_first_use.h says why and how).
#include "kernels/cuda/cublas_on_first_use.h"

#include <dlfcn.h>

#include <string>

#include "engine/error.h"

namespace brigade::cuda::vendor {
namespace {

// dlerror's text for the last failure, or `fallback` when it has none.
std::string loader_reason(const char* fallback) {
  const char* reason = dlerror();
  return reason != nullptr ? reason : fallback;
}

// `slot` = the address of `name` in `library`, or an Error naming both.
template <class Function>
void look_up(void* library, const std::string& soname, const char* name, Function& slot) {
  (void)dlerror();  // clears an earlier failure's text
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr)
    throw Error("cuBLAS: " + soname + " has no " + name + " (" +
                loader_reason("the symbol is null") +
                "): the vendor CUDA path needs cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) +
                ", the version Brigade was built with");
}

// The process's cuBLAS, opened by the first call of a function below. A failed open throws
// out of that call and leaves nothing behind: the next call tries again (and fails the same
// way when the library is still missing).
const CublasFunctions& cublas() {
  static const CublasFunctions functions = open_cublas(cublas_soname());
  return functions;
}

}  // namespace

std::string cublas_soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

CublasFunctions open_cublas(const std::string& soname) {
  // RTLD_LOCAL: the library's names stay out of the program's global scope, so they cannot
  // take the place of the definitions below for anything loaded later. Never closed: handles
  // made by it live as long as the process (vendor_handles.h).
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    throw Error("cuBLAS: cannot open " + soname + " (" + loader_reason("no reason given") +
                "): the vendor CUDA path (cuBLAS GEMMs, the default) needs cuBLAS " +
                std::to_string(CUBLAS_VER_MAJOR) +
                " where the program's loader finds it (the CUDA toolkit's lib64 on "
                "LD_LIBRARY_PATH), or BRIGADE_CUDA_PATH=handwritten");
  CublasFunctions f;
  look_up(library, soname, "cublasCreate_v2", f.create);
  look_up(library, soname, "cublasSetMathMode", f.set_math_mode);
  look_up(library, soname, "cublasSetStream_v2", f.set_stream);
  look_up(library, soname, "cublasSetWorkspace_v2", f.set_workspace);
  look_up(library, soname, "cublasSgemm_v2", f.sgemm);
  look_up(library, soname, "cublasGemmEx", f.gemm_ex);
  look_up(library, soname, "cublasGetStatusString", f.status_string);
  return f;
}

}  // namespace brigade::cuda::vendor

// The definitions the program links against, with cublas_api.h's declarations. Hidden: a
// program's own copy, never offered to another library of the process in cuBLAS's place.
using brigade::cuda::vendor::cublas;

extern "C" {

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasCreate_v2(cublasHandle_t* handle) {
  return cublas().create(handle);
}

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return cublas().set_math_mode(handle, mode);
}

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return cublas().set_stream(handle, stream);
}

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspace_bytes) {
  return cublas().set_workspace(handle, workspace, workspace_bytes);
}

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
               int n, int k, const float* alpha, const float* A, int lda, const float* B,
               int ldb, const float* beta, float* C, int ldc) {
  return cublas().sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

__attribute__((visibility("hidden"))) cublasStatus_t CUBLASWINAPI
cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
             int n, int k, const void* alpha, const void* A, cudaDataType A_type, int lda,
             const void* B, cudaDataType B_type, int ldb, const void* beta, void* C,
             cudaDataType C_type, int ldc, cublasComputeType_t compute_type,
             cublasGemmAlgo_t algo) {
  return cublas().gemm_ex(handle, transa, transb, m, n, k, alpha, A, A_type, lda, B, B_type,
                          ldb, beta, C, C_type, ldc, compute_type, algo);
}

__attribute__((visibility("hidden"))) const char* CUBLASWINAPI
cublasGetStatusString(cublasStatus_t status) {
  return cublas().status_string(status);
}

}  // extern "C"

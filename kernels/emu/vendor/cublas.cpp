// Emulated cuBLAS: handles, their stream, math mode and workspace, SGEMM, and GemmEx with
// bfloat16 inputs.
//
// Both GEMMs are the BLAS definition, column-major: C = alpha · op(A) · op(B) + beta · C, with
// C not read when beta is 0 (so garbage in C, NaN included, is overwritten), each element summed
// in float in the order of k. SGEMM on a handle in CUBLAS_TF32_TENSOR_OP_MATH reads every
// element of A and B as a tensor core does, rounded to TF32 (kernels/reference/tf32.h); any
// other mode computes in FP32. GemmEx takes A and B in bfloat16 (CUDA_R_16BF), C in float, and
// CUBLAS_COMPUTE_32F: each bf16 element widened to float (exact), so every product of two is
// exact and the sums are float's — what a tensor core computes from bf16 inputs; the math mode
// does not touch it (TF32 concerns float inputs). Every other combination of types that cuBLAS
// takes is refused (CUBLAS_STATUS_NOT_SUPPORTED, saying that it is valid but not emulated), as
// is every combination cuBLAS refuses. With a workspace set (cublasSetWorkspace) large enough,
// the product is formed in the workspace first, as cuBLAS's split-K kernels do: two streams
// given one workspace then race, as they would on a GPU.
#include <cublas_v2.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/vendor/library.h"
#include "kernels/reference/tf32.h"

struct cublasContext : brigade::emu::vendor::Handle {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  void* workspace = nullptr;  // null: cuBLAS's own pool (the emulation computes in place)
  size_t workspace_bytes = 0;
};

using namespace brigade::emu;
using vendor::Failure;
using vendor::Library;

namespace {

const char* nvidia_text(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown error";
}

cublasStatus_t fail(cublasStatus_t status, const std::string& detail) {
  return static_cast<cublasStatus_t>(
      vendor::remember(Library::cublas, status, nvidia_text(status), detail));
}

// The status a refused call returns: what cuBLAS answers when it cannot launch its kernels.
cublasStatus_t refused(const vendor::Refusal& r) {
  switch (r.failure) {
    case Failure::none: return CUBLAS_STATUS_SUCCESS;
    case Failure::dead_handle: return fail(CUBLAS_STATUS_NOT_INITIALIZED, r.detail);
    case Failure::stream_not_set: return fail(CUBLAS_STATUS_INVALID_VALUE, r.detail);
    default: return fail(CUBLAS_STATUS_EXECUTION_FAILED, r.detail);
  }
}

// Bytes spanned by a column-major rows × cols matrix of `element`-byte elements with leading
// dimension ld.
uint64_t span(int rows, int cols, int ld, uint64_t element) {
  if (rows == 0 || cols == 0) return 0;
  return (static_cast<uint64_t>(ld) * static_cast<uint64_t>(cols - 1) + static_cast<uint64_t>(rows)) *
         element;
}

// What every GEMM entry point checks of its sizes: "CUBLAS_STATUS_INVALID_VALUE: the
// parameters m, n, k < 0" (and the leading dimensions below the rows they hold, a null alpha
// or beta). Empty when they are valid.
std::string invalid_sizes(const char* call, cublasOperation_t transa, cublasOperation_t transb,
                          int m, int n, int k, int lda, int ldb, int ldc, const void* alpha,
                          const void* beta) {
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const int a_rows = ta ? k : m, b_rows = tb ? n : k;
  if (transa <= CUBLAS_OP_C && transb <= CUBLAS_OP_C && m >= 0 && n >= 0 && k >= 0 &&
      lda >= std::max(1, a_rows) && ldb >= std::max(1, b_rows) && ldc >= std::max(1, m) &&
      alpha != nullptr && beta != nullptr)
    return "";
  return std::string(call) + ": (m, n, k) = (" + std::to_string(m) + ", " + std::to_string(n) +
         ", " + std::to_string(k) + "), (lda, ldb, ldc) = (" + std::to_string(lda) + ", " +
         std::to_string(ldb) + ", " + std::to_string(ldc) + "), transa " +
         std::to_string(transa) + ", transb " + std::to_string(transb) +
         (alpha && beta ? "" : ", a null alpha or beta");
}

// The element types of A and B a GEMM reads: float (SGEMM), or bfloat16 (GemmEx).
enum class Input { f32, bf16 };

// A float widened from bfloat16's bits: exact.
float widen(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// C = a · op(A) · op(B) + b · C (column-major; sizes checked) as a task on the handle's stream,
// A and B read as `input`: the one computation behind cublasSgemm and cublasGemmEx.
vendor::Refusal gemm_on_stream(cublasHandle_t handle, const char* call, Input input,
                               cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                               int k, float a, const void* A, int lda, const void* B, int ldb,
                               float b, float* C, int ldc) {
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;  // OP_C is OP_T: real types
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  void* ws = nullptr;
  uint64_t ws_bytes = 0;
  bool tf32 = false;  // float inputs rounded to TF32, as tensor cores read them
  {
    gpu::Emulation& e = gpu::Emulation::get();
    std::lock_guard lock(e.mutex);
    const bool usable = vendor::check_handle(handle, call).failure == Failure::none;
    tf32 = usable && input == Input::f32 && handle->math == CUBLAS_TF32_TENSOR_OP_MATH;
    if (usable && handle->workspace != nullptr &&
        handle->workspace_bytes >= uint64_t{sizeof(float)} * static_cast<uint64_t>(m) * static_cast<uint64_t>(n)) {
      ws = handle->workspace;
      ws_bytes = uint64_t{sizeof(float)} * static_cast<uint64_t>(m) * static_cast<uint64_t>(n);
    }
  }
  const uint64_t element = input == Input::bf16 ? sizeof(uint16_t) : sizeof(float);
  const std::vector<vendor::Operand> operands{
      {A, span(a_rows, a_cols, lda, element), "A"}, {B, span(b_rows, b_cols, ldb, element), "B"},
      {C, span(m, n, ldc, sizeof(float)), "C", true}, {ws, ws_bytes, "workspace", true}};
  return vendor::run_on_stream(handle, call, operands, [=] {
    // Element i of an operand, as the GEMM multiplies it.
    auto load = [&](const void* p, int64_t i) {
      if (input == Input::bf16) return widen(static_cast<const uint16_t*>(p)[i]);
      const float v = static_cast<const float*>(p)[i];
      return tf32 ? brigade::ref::round_to_tf32(v) : v;
    };
    auto op_a = [&](int i, int l) {
      return load(A, ta ? l + int64_t{i} * lda : i + int64_t{l} * lda);
    };
    auto op_b = [&](int l, int j) {
      return load(B, tb ? j + int64_t{l} * ldb : l + int64_t{j} * ldb);
    };
    float* product = ws != nullptr ? static_cast<float*>(ws) : nullptr;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int l = 0; l < k; ++l) acc += op_a(i, l) * op_b(l, j);
        if (product) product[i + int64_t{j} * m] = acc;
        else C[i + int64_t{j} * ldc] = b == 0.0f ? a * acc : a * acc + b * C[i + int64_t{j} * ldc];
      }
    if (product)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          float& c = C[i + int64_t{j} * ldc];
          c = b == 0.0f ? a * product[i + int64_t{j} * m] : a * product[i + int64_t{j} * m] + b * c;
        }
  });
}

const char* type_name(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
  }
  return "an unknown cudaDataType";
}

// Why cublasGemmEx cannot take these types (empty when it can, as emulated): cuBLAS's table
// of supported combinations for the compute types Brigade uses, and of those only the one
// it calls. "CUBLAS_STATUS_NOT_SUPPORTED: the combination of the parameters Atype, Btype and
// Ctype or the algorithm, algo is not supported" (cublasGemmEx).
std::string unsupported_types(cudaDataType at, cudaDataType bt, cudaDataType ct,
                              cublasComputeType_t compute) {
  const std::string types = std::string("A ") + type_name(at) + ", B " + type_name(bt) + ", C " +
                            type_name(ct) + ", compute type " + std::to_string(compute);
  if (at != bt) return "cublasGemmEx: " + types + ": A and B must have one type";
  const bool compute_32f = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
  if (compute_32f && at == CUDA_R_16BF && ct == CUDA_R_32F) return "";  // what Brigade calls
  // The other combinations cuBLAS lists for these element types (cublasGemmEx's table).
  const bool listed =
      (compute_32f && (at == CUDA_R_16BF || at == CUDA_R_16F) && (ct == at || ct == CUDA_R_32F)) ||
      ((compute_32f || compute == CUBLAS_COMPUTE_32F_FAST_16F ||
        compute == CUBLAS_COMPUTE_32F_FAST_16BF || compute == CUBLAS_COMPUTE_32F_FAST_TF32) &&
       at == CUDA_R_32F && ct == CUDA_R_32F) ||
      ((compute == CUBLAS_COMPUTE_16F || compute == CUBLAS_COMPUTE_16F_PEDANTIC) &&
       at == CUDA_R_16F && ct == CUDA_R_16F) ||
      ((compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC) &&
       at == CUDA_R_64F && ct == CUDA_R_64F);
  if (listed)
    return "cublasGemmEx: " + types + ": valid for cuBLAS, not emulated (the emulation runs A "
           "and B CUDA_R_16BF, C CUDA_R_32F, CUBLAS_COMPUTE_32F only)";
  return "cublasGemmEx: " + types + ": not a combination cuBLAS supports";
}

bool known_algorithm(cublasGemmAlgo_t algo) {
  return algo == CUBLAS_GEMM_DEFAULT || (algo >= CUBLAS_GEMM_ALGO0 && algo <= CUBLAS_GEMM_ALGO23) ||
         (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

}  // namespace

extern "C" {

const char* cublasGetStatusString(cublasStatus_t status) {
  brigade::emu::gpu::count_call("cublasGetStatusString");
  return vendor::text_of(Library::cublas, status, nvidia_text(status));
}

// "This function initializes the cuBLAS library and creates a handle ... The cuBLAS library
// context is tied to the current CUDA device."
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  brigade::emu::gpu::count_call("cublasCreate_v2");
  if (handle == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is null");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return fail(CUBLAS_STATUS_NOT_INITIALIZED,
                std::string("cublasCreate: ") + cudaGetErrorString(cudaGetLastError()));
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  if (gpu::current_gpu("cublasCreate") == nullptr)
    return fail(CUBLAS_STATUS_NOT_INITIALIZED,
                std::string("cublasCreate: ") + cudaGetErrorString(cudaGetLastError()));
  // "It allocates hardware resources on the host and device": a potentially unsafe call
  // while the thread's stream captures a graph (capture.cpp), refused as cudaMalloc is.
  if (gpu::unsafe_call_refused("cublasCreate") != cudaSuccess)
    return fail(CUBLAS_STATUS_ALLOC_FAILED,
                std::string("cublasCreate: ") + cudaGetErrorString(cudaGetLastError()));
  auto* h = new cublasContext();
  h->device = device;
  vendor::register_handle(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  brigade::emu::gpu::count_call("cublasDestroy_v2");
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  const vendor::Refusal r = vendor::check_handle(handle, "cublasDestroy");
  if (r.failure == Failure::dead_handle) return refused(r);  // any current device will do
  handle->destroyed = true;  // kept (library.h): a later call on it is refused by name
  return CUBLAS_STATUS_SUCCESS;
}

// "cublasSetStream ... unconditionally resets the cuBLAS library workspace back to the
// default workspace pool" (cuBLAS documentation): a workspace is set after the stream.
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  brigade::emu::gpu::count_call("cublasSetStream_v2");
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  const vendor::Refusal r = vendor::set_stream(handle, stream, "cublasSetStream");
  if (r.failure == Failure::dead_handle || r.failure == Failure::dead_stream) return refused(r);
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  brigade::emu::gpu::count_call("cublasSetWorkspace_v2");
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  const vendor::Refusal r = vendor::check_handle(handle, "cublasSetWorkspace");
  if (r.failure == Failure::dead_handle) return refused(r);
  if (bytes > 0 && workspace == nullptr)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace: a null workspace of " +
                                                 std::to_string(bytes) + " bytes");
  // "the workspace pointer has to be aligned to at least 256 bytes, otherwise
  // CUBLAS_STATUS_INVALID_VALUE error is returned" (cublasSetWorkspace)
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                "cublasSetWorkspace: the workspace is not aligned to 256 bytes");
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  brigade::emu::gpu::count_call("cublasSetMathMode");
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  const vendor::Refusal r = vendor::check_handle(handle, "cublasSetMathMode");
  if (r.failure == Failure::dead_handle) return refused(r);
  if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: unknown mode " + std::to_string(mode));
  handle->math = mode;  // SGEMM reads it: TF32 inputs in CUBLAS_TF32_TENSOR_OP_MATH
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  brigade::emu::gpu::count_call("cublasSgemm_v2");
  if (const std::string why = invalid_sizes("cublasSgemm", transa, transb, m, n, k, lda, ldb,
                                            ldc, alpha, beta);
      !why.empty())
    return fail(CUBLAS_STATUS_INVALID_VALUE, why);
  // Host pointer mode: alpha and beta are read at the call.
  return refused(gemm_on_stream(handle, "cublasSgemm", Input::f32, transa, transb, m, n, k,
                                *alpha, A, lda, B, ldb, *beta, C, ldc));
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  brigade::emu::gpu::count_call("cublasGemmEx");
  if (const std::string why = invalid_sizes("cublasGemmEx", transa, transb, m, n, k, lda, ldb,
                                            ldc, alpha, beta);
      !why.empty())
    return fail(CUBLAS_STATUS_INVALID_VALUE, why);
  if (const std::string why = unsupported_types(Atype, Btype, Ctype, computeType); !why.empty())
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, why);
  if (!known_algorithm(algo))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "cublasGemmEx: algorithm " + std::to_string(algo) + " is not a cublasGemmAlgo_t");
  // CUBLAS_COMPUTE_32F: alpha and beta are floats, read at the call (host pointer mode).
  return refused(gemm_on_stream(handle, "cublasGemmEx", Input::bf16, transa, transb, m, n, k,
                                *static_cast<const float*>(alpha), A, lda, B, ldb,
                                *static_cast<const float*>(beta), static_cast<float*>(C), ldc));
}

}  // extern "C"

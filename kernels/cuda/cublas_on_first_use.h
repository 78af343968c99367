// cuBLAS, opened at a program's first cuBLAS call instead of when the program starts.
//
// Why: libcublas needs libcublasLt, whose static constructors register its thousands of GPU
// kernels as the library loads: about 0.4 s of CPU at every start of a program linked against
// it (a C program that only returns takes 0.37 s linked with libcublasLt, 0.00 s with the CUDA
// runtime, cuDNN or NCCL, on an AMD EPYC). A Brigade program that never calls cuBLAS — a run on
// CPU devices, on the hand-written kernels, `brigade-train --help` — would pay it for nothing.
//
// How: a native CUDA build does not link cuBLAS. cublas_on_first_use.cpp defines each cuBLAS
// function Brigade calls, with cublas_api.h's declaration; the first call of any of them opens
// cublas_soname() with dlopen and looks all of them up (once per process), and each call then
// goes through the pointer found. The callers (cublas_gemm.cpp, vendor_handles.cpp) read as
// plain cuBLAS code. A function Brigade starts to call that is not defined there is a link
// error of the native build, never a silent gap.
//
// The library is found as the linked ones are (LD_LIBRARY_PATH, the program's RUNPATH, which
// names the toolkit's lib64, the loader's cache). If it cannot be opened or lacks a function,
// that first call throws brigade::Error naming the library and the loader's reason: the vendor
// path needs cuBLAS; nothing falls back to the hand-written kernels.
//
// The first call is a CublasLease's cublasCreate (vendor_handles.cpp), which runs with the
// thread's graph-capture mode relaxed, so a capture may be what opens the library: loading
// registers kernels with cuBLAS's own copy of the CUDA runtime and enqueues nothing.
//
// Emulated builds (-Dcuda=emulated) link their emulated cuBLAS (kernels/emu/vendor/) and
// compile neither file.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace brigade::cuda::vendor {

// cublasGemmEx, the C function: C++ also sees an inline overload taking the older cudaDataType
// compute type (cublas_api.h), so &cublasGemmEx alone names no one function.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void* alpha, const void* A, cudaDataType,
                                        int, const void* B, cudaDataType, int, const void* beta,
                                        void* C, cudaDataType, int, cublasComputeType_t,
                                        cublasGemmAlgo_t);

// The cuBLAS functions Brigade calls, as found in an opened library.
struct CublasFunctions {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// "libcublas.so.<major>", the major version of the cuBLAS headers the build compiled against
// (cuBLAS keeps its functions' signatures within a major version).
std::string cublas_soname();

// Opens the shared library `soname` (kept open for the process) and looks up every function
// of CublasFunctions; throws brigade::Error naming `soname` and the loader's reason when it
// cannot be opened or lacks one. The first cuBLAS call opens cublas_soname() through it.
CublasFunctions open_cublas(const std::string& soname);

}  // namespace brigade::cuda::vendor

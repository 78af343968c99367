// cuBLAS opened at the first cuBLAS call (kernels/cuda/cublas_on_first_use.h), in a native
// CUDA build. Nothing here needs a GPU: opening cuBLAS and asking it for a status string are
// host-only. An executable of its own, so that no other test has called cuBLAS before the
// first check below: it is what shows that the program does not load cuBLAS when it starts.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "kernels/cuda/cublas_on_first_use.h"

namespace vendor = brigade::cuda::vendor;

namespace {
// A handle of `soname` if the process has it loaded already, else nullptr (RTLD_NOLOAD loads
// nothing). A handle returned counts a reference: the caller closes it.
void* loaded(const std::string& soname) {
  return dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
}

// Taken before main, so before any test case of any order has made a cuBLAS call.
const bool cublas_loaded_at_start = [] {
  void* library = loaded(vendor::cublas_soname());
  if (library != nullptr) dlclose(library);
  return library != nullptr;
}();
}  // namespace

TEST_CASE("cuBLAS is loaded by the program's first cuBLAS call, not when it starts") {
  const std::string soname = vendor::cublas_soname();
  CHECK(soname == "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  CHECK_FALSE(cublas_loaded_at_start);

  // The program's own cublasGetStatusString opens the library and forwards to the library's.
  const std::string text = cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED);
  void* library = loaded(soname);
  REQUIRE(library != nullptr);
  void* libraries_address = dlsym(library, "cublasGetStatusString");
  REQUIRE(libraries_address != nullptr);
  CHECK(libraries_address != reinterpret_cast<void*>(&cublasGetStatusString));  // two functions
  auto* libraries_own = reinterpret_cast<decltype(&cublasGetStatusString)>(libraries_address);
  CHECK(text == libraries_own(CUBLAS_STATUS_NOT_SUPPORTED));
  CHECK(text != libraries_own(CUBLAS_STATUS_SUCCESS));  // the status reached the library
  dlclose(library);
}

TEST_CASE("a cuBLAS the loader cannot find, or one lacking a function, is an error naming it") {
  CHECK_THROWS_WITH_AS(vendor::open_cublas("libcublas.so.999"),
                       doctest::Contains("cuBLAS: cannot open libcublas.so.999 ("),
                       brigade::Error);
  CHECK_THROWS_WITH_AS(vendor::open_cublas("libcublas.so.999"),
                       doctest::Contains("BRIGADE_CUDA_PATH=handwritten"), brigade::Error);
  // A library that opens but is not cuBLAS: the CUDA runtime, which the program links.
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  const std::string lacks = "cuBLAS: " + cudart + " has no cublasCreate_v2 (";
  CHECK_THROWS_WITH_AS(vendor::open_cublas(cudart), doctest::Contains(lacks.c_str()),
                       brigade::Error);
  // The real one has every function.
  const vendor::CublasFunctions found = vendor::open_cublas(vendor::cublas_soname());
  const bool every_function_found = found.create && found.set_math_mode && found.set_stream &&
                                    found.set_workspace && found.sgemm && found.gemm_ex &&
                                    found.status_string;
  CHECK(every_function_found);
}

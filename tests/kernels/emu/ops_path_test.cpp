// kernels/cuda/path.h, the run-time choice between the hand-written CUDA kernels and the
// vendor libraries: parsed, printed, set, and initialised from BRIGADE_CUDA_PATH. Plain C++,
// so it is tested in every build (the vendor paths themselves need a GPU: tests/kernels/cuda).
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/path.h"

using brigade::CudaPath;

TEST_CASE("cuda path: the environment sets the default, set_cuda_path changes it, both print") {
  // Nothing else in this executable reads the setting, so this is its first use: the
  // environment variable decides the initial value.
  REQUIRE(setenv("BRIGADE_CUDA_PATH", "handwritten", 1) == 0);
  CHECK(brigade::cuda_path() == CudaPath::handwritten);
  CHECK(brigade::describe_cuda_path() ==
        "cuda path: handwritten (every op by the kernels of kernels/cuda/*.cu)");
  brigade::set_cuda_path(CudaPath::vendor);
  CHECK(brigade::cuda_path() == CudaPath::vendor);
  CHECK(brigade::describe_cuda_path().find("cuBLAS GEMM, cuDNN convolution and pooling") !=
        std::string::npos);
  REQUIRE(setenv("BRIGADE_CUDA_PATH", "handwritten", 1) == 0);
  CHECK(brigade::cuda_path() == CudaPath::vendor);  // read once, at first use only
  brigade::set_cuda_path(CudaPath::handwritten);
  unsetenv("BRIGADE_CUDA_PATH");
}

TEST_CASE("cuda path: names round-trip and a bad name is an error naming the choices") {
  for (CudaPath p : {CudaPath::handwritten, CudaPath::vendor})
    CHECK(brigade::parse_cuda_path(brigade::cuda_path_name(p)) == p);
  CHECK_THROWS_WITH_AS(brigade::parse_cuda_path("cudnn"),
                       "invalid CUDA path \"cudnn\": expected \"handwritten\" or \"vendor\"",
                       std::invalid_argument);
}

// PrecisionFor: the process's precision (kernels/precision.h) set for one scope, fp32 again
// when the scope ends, however it ends (a failed REQUIRE throws), so one test's bf16 never
// leaks into the next test of the executable. Bf16OnPath: precision bf16 and a CUDA path
// (kernels/cuda/path.h) for one scope, fp32 and the path before after it.
#pragma once

#include "kernels/cuda/path.h"
#include "kernels/precision.h"

namespace brigade::testing {

struct PrecisionFor {
  explicit PrecisionFor(Precision p) { set_precision(p); }
  ~PrecisionFor() { set_precision(Precision::fp32); }
  PrecisionFor(const PrecisionFor&) = delete;
  PrecisionFor& operator=(const PrecisionFor&) = delete;
};

struct Bf16OnPath {
  explicit Bf16OnPath(CudaPath p) {
    set_cuda_path(p);
    set_precision(Precision::bf16);
  }
  ~Bf16OnPath() {
    set_precision(Precision::fp32);
    set_cuda_path(before);
  }
  Bf16OnPath(const Bf16OnPath&) = delete;
  Bf16OnPath& operator=(const Bf16OnPath&) = delete;
  CudaPath before = cuda_path();
};

}  // namespace brigade::testing

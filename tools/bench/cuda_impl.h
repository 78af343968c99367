// The CUDA implementation a bench row measures, and its arithmetic: the path (kernels/cuda/
// path.h) and the math mode (kernels/math_mode.h) set together before the row's calls. The
// math mode asked for (--math) is the vendor rows'; the hand-written kernels compute in fp32
// only, so their rows are fp32 whatever --math says (the table and the JSON say which).
#pragma once

#include <string>

#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"

namespace brigade::bench {

// For the rows measured while it lives; fp32 again after them, so that the CPU rows that
// follow run (the GEMM and convolution ops refuse tf32 on CPU devices).
class CudaImpl {
 public:
  CudaImpl(const std::string& impl, MathMode vendor_math) {
    const CudaPath path = parse_cuda_path(impl);
    set_cuda_path(path);
    set_math_mode(path == CudaPath::vendor ? vendor_math : MathMode::fp32);
  }
  ~CudaImpl() { set_math_mode(MathMode::fp32); }
  CudaImpl(const CudaImpl&) = delete;
  CudaImpl& operator=(const CudaImpl&) = delete;
};

}  // namespace brigade::bench

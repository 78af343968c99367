// Which CUDA implementation runs the ops that have two: the hand-written kernels of this
// folder, or the vendor libraries (cuBLAS for GEMM — Dense and nothing else —, cuDNN for
// Conv2D forward / backward-data / backward-filter and max pooling). Ops with one
// implementation (ReLU, dropout, softmax, optimizers, ...) always run the hand-written kernel.
//
// One setting per process, read by the op dispatcher (kernels/ops/*.cpp) at every call;
// set it before training starts (changing it between two ops of one step is allowed, and
// takes effect at the next op). Default: BRIGADE_CUDA_PATH from the environment
// ("handwritten" or "vendor") if set, else vendor — the fast one, and the one users get. Both
// exist in every CUDA build: on emulated GPUs (-Dcuda=emulated) the vendor path calls
// emulated cuBLAS and cuDNN (kernels/emu/vendor/), which enforce the libraries' rules over the
// reference kernels, so the host code of the default path runs in CI. The choice is visible:
// describe_cuda_path() is the line a program prints at start-up, e.g.
//   cuda path: vendor (cuBLAS GEMM, cuDNN convolution and pooling; hand-written kernels for the other ops)
// This header is plain C++ (no CUDA): a CPU-only build can parse and print the setting too.
#pragma once

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade {

enum class CudaPath { handwritten, vendor };

inline const char* cuda_path_name(CudaPath p) {
  return p == CudaPath::handwritten ? "handwritten" : "vendor";
}

// "handwritten" or "vendor"; anything else throws std::invalid_argument naming both.
inline CudaPath parse_cuda_path(std::string_view text) {
  if (text == "handwritten") return CudaPath::handwritten;
  if (text == "vendor") return CudaPath::vendor;
  throw std::invalid_argument("invalid CUDA path \"" + std::string(text) +
                              "\": expected \"handwritten\" or \"vendor\"");
}

namespace path_detail {
// The setting, initialised from BRIGADE_CUDA_PATH on first use (a bad value throws there,
// at the first op, with the variable's name — not silently ignored).
inline std::atomic<CudaPath>& setting() {
  static std::atomic<CudaPath> path([] {
    const char* env = std::getenv("BRIGADE_CUDA_PATH");
    if (env == nullptr || *env == '\0') return CudaPath::vendor;
    try {
      return parse_cuda_path(env);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("BRIGADE_CUDA_PATH: ") + e.what());
    }
  }());
  return path;
}
}  // namespace path_detail

inline CudaPath cuda_path() { return path_detail::setting().load(std::memory_order_relaxed); }
inline void set_cuda_path(CudaPath p) {
  path_detail::setting().store(p, std::memory_order_relaxed);
}

inline std::string describe_cuda_path(CudaPath p = cuda_path()) {
  return p == CudaPath::vendor
             ? "cuda path: vendor (cuBLAS GEMM, cuDNN convolution and pooling; hand-written "
               "kernels for the other ops)"
             : "cuda path: handwritten (every op by the kernels of kernels/cuda/*.cu)";
}

}  // namespace brigade

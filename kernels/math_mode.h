// The arithmetic of the GEMMs and convolutions: plain FP32, or TF32 on tensor cores.
//
//   fp32   every product of two floats is a float product (FMA units): the default, and the
//          only mode in which a GPU run agrees with the CPU devices and the reference kernels
//          to float rounding (the parity the tests hold).
//   tf32   the vendor libraries may use tensor cores: cuBLAS handles in
//          CUBLAS_TF32_TENSOR_OP_MATH, cuDNN convolution descriptors in CUDNN_TENSOR_OP_MATH
//          with tensor-op algorithms allowed. Each input of a product is first rounded to
//          TF32 (10 mantissa bits instead of 23; kernels/reference/tf32.h), and the sum is
//          accumulated in FP32. Faster on Ampere and later; results differ from fp32's by
//          about 1e-3 relative per product.
//
// TF32 exists only on the vendor path of CUDA devices (kernels/cuda/path.h). Anywhere else
// (a CPU device, the hand-written CUDA kernels) the GEMM and convolution ops refuse to run in
// tf32 (check_math_mode), never computing FP32 in its place: a program checks the mode against
// its devices and path before it starts (math_mode_refusal), and says so in one message.
// One exception runs TF32 in fp32 mode, changing no value: precision bf16's convolutions on
// the vendor path (kernels/ops/conv2d.cpp, cudnn_math), whose operands are bf16 values, each
// exactly a TF32 value.
//
// One setting per process, like the CUDA path, read by the vendor code at each call; set it
// before training starts. cuBLAS handles are pooled per mode and cuDNN descriptors and
// algorithm choices are cached per (shape, mode), so a change takes effect at the next op
// and never alters a handle or descriptor another thread is using.
// This header is plain C++ (no CUDA): every build can parse, print and refuse the setting.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade {

enum class MathMode { fp32, tf32 };

inline const char* math_mode_name(MathMode m) { return m == MathMode::fp32 ? "fp32" : "tf32"; }

// "fp32" or "tf32"; anything else throws std::invalid_argument naming both.
inline MathMode parse_math_mode(std::string_view text) {
  if (text == "fp32") return MathMode::fp32;
  if (text == "tf32") return MathMode::tf32;
  throw std::invalid_argument("invalid math mode \"" + std::string(text) +
                              "\": expected \"fp32\" or \"tf32\"");
}

namespace math_mode_detail {
inline std::atomic<MathMode>& setting() {
  static std::atomic<MathMode> mode{MathMode::fp32};
  return mode;
}
}  // namespace math_mode_detail

inline MathMode math_mode() {
  return math_mode_detail::setting().load(std::memory_order_relaxed);
}
inline void set_math_mode(MathMode m) {
  math_mode_detail::setting().store(m, std::memory_order_relaxed);
}

// Why `m` cannot run on `device` (its name, e.g. "cpu:0" or "cuda:1") with the CUDA path
// named `cuda_path` ("vendor" or "handwritten"; ignored for a CPU device); empty when it can.
inline std::string math_mode_refusal(MathMode m, bool device_is_cuda, const std::string& device,
                                     std::string_view cuda_path) {
  if (m == MathMode::fp32) return "";
  if (!device_is_cuda)
    return "math mode tf32 needs tensor cores: " + device +
           " is a CPU device, which computes in fp32 only (use --math fp32, the default)";
  if (cuda_path != "vendor")
    return "math mode tf32 runs through cuBLAS and cuDNN: the " + std::string(cuda_path) +
           " CUDA path of " + device +
           " computes in fp32 only (unset BRIGADE_CUDA_PATH for the vendor path, or use --math "
           "fp32)";
  return "";
}

}  // namespace brigade

// The precision of the GEMMs and convolutions in training: fp32, or bf16 with fp32 master
// weights.
//
//   fp32   every op in float (the default; every result bit for bit what it always was).
//   bf16   Dense and Conv2D (forward, backward-data, backward-filter) round their two GEMM
//          operands to bfloat16 (round to nearest, ties to even: kernels/cpu/bf16.h) and
//          accumulate the products in float; their outputs are float. Everything else stays
//          float: the parameters and their gradients (summed across micro-batches), the
//          optimizer and its state (the "master weights"), bias, ReLU, pooling, dropout,
//          softmax, the loss and every reduction. No loss scaling: bf16 has float's exponent
//          range. Each op's own rule is written beside its kernel (kernels/cpu/dense_bf16.h,
//          kernels/cpu/conv2d/bf16.h).
//          And at every layer boundary — where a pipeline may cut the model — the values are
//          bf16, as under PyTorch's autocast: each layer's output, and the gradient of each
//          layer's input, is rounded to bf16 (kept in float32 storage) before anything reads
//          it (layers/bf16_boundary.h). Inside a layer the float rules above hold (a Dense's
//          bias gradient sums the float dy it is given; a Dropout scales in float, then its
//          output is rounded); the loss reads the last layer's rounded output in float, and
//          the gradient it returns stays float (the loss and the last layer are always on one
//          stage). So a stage's input and output, and the gradients it receives and sends,
//          are bf16 values on any cut: one device and N devices compute the same bits, and
//          the tensors cross between stages in bf16 storage (DType::bfloat16, half the bytes)
//          losslessly (pipeline/runtime/README.md). The model's input is data, not rounded.
//
// bf16 exists on CPU devices (AVX-512 BF16's vdpbf16ps where the processor has it, the same
// bits portably elsewhere) and on both CUDA paths (kernels/cuda/path.h). On a GPU the
// boundaries are rounded, narrowed and widened by kernels/cuda/bf16_values.cu (the CPU's bits),
// or rounded by the hand-written kernel that writes the tensor, as it stores it, where there is
// one (kernels/ops.h's Bf16Rounding); then, for Dense and Conv2D:
//   vendor       Dense's GEMMs narrow their two operands to bfloat16 storage and run cuBLAS's
//                bf16 GEMM (cublasGemmEx: A, B CUDA_R_16BF, C CUDA_R_32F, CUBLAS_COMPUTE_32F;
//                kernels/cuda/cublas_gemm.cpp), on tensor cores where the GPU has them.
//                Conv2D runs cuDNN in fp32 on its operands rounded to bf16 values, because
//                cuDNN's bf16 convolution writes its output in bf16, before the bias
//                (kernels/ops/conv2d.cpp says why); under --math tf32 on TF32 tensor cores,
//                which read a bf16 value exactly.
//   handwritten  Dense and Conv2D narrow their operands to bfloat16 storage too and run the
//                hand-written bf16 GEMM on tensor cores (kernels/cuda/gemm_mma.cu: PTX
//                mma.sync m16n8k16, bf16 A and B, fp32 accumulation; Conv2D lowers the
//                narrowed input to bf16 columns first). On emulated GPUs and CPU streams the
//                instruction is emulated from its documented fragment layout (mma_bf16.cuh).
// Either way each product of two bf16 values is exact in float and the sums are float: the rule
// above. A GPU's sums are grouped differently from a CPU's (and cuBLAS's from the hand-written
// kernels'), so GPU and CPU runs, and the two paths, differ in the last bits; runs on one path
// agree bit for bit on any schedule and device count.
//
// One setting per process, like kernels/math_mode.h; an op reads it when it is enqueued, so
// set it before training starts. Plain C++: every build can parse and print it.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade {

enum class Precision { fp32, bf16 };

inline const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "bf16"; }

// "fp32" or "bf16"; anything else throws std::invalid_argument naming both.
inline Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  throw std::invalid_argument("invalid precision \"" + std::string(text) +
                              "\": expected \"fp32\" or \"bf16\"");
}

namespace precision_detail {
inline std::atomic<Precision>& setting() {
  static std::atomic<Precision> p{Precision::fp32};
  return p;
}
}  // namespace precision_detail

inline Precision precision() { return precision_detail::setting().load(std::memory_order_relaxed); }
inline void set_precision(Precision p) {
  precision_detail::setting().store(p, std::memory_order_relaxed);
}

}  // namespace brigade

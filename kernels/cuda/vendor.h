// The vendor fast paths: cuBLAS for the GEMMs of Dense, cuDNN for Conv2D and max pooling.
// CUDA builds only (BRIGADE_HAVE_CUDA): NVIDIA's libraries on a GPU, emulated ones on emulated
// GPUs (kernels/emu/vendor/); they run on CUDA streams and are checked against the reference
// and the hand-written kernels (tests/kernels/cuda/). Which of the two a program uses is
// kernels/cuda/path.h's setting.
//
// Same contracts as the hand-written launchers (dx overwritten, dw/db accumulated), with two
// differences the dispatcher must know:
//  - cuDNN max pooling does not produce an argmax: its backward reads x and y instead
//    (and breaks ties its own way; the hand-written kernel's rule is the first maximum).
//  - cuDNN pads symmetrically. TensorFlow's "same" puts an odd total padding's extra row at
//    the bottom (even kernels, some strides); such a shape is rejected here with an error
//    saying so — never quietly run elsewhere. The question's network ("valid") is unaffected.
//
// Handles: a pool of cuBLAS and of cuDNN handles per device, one leased per call, created
// when none is idle and kept for the process (vendor_handles.h). Every library call is
// checked (BRIGADE_CUBLAS_CHECK, BRIGADE_CUDNN_CHECK): a failure throws brigade::Error with
// the call and file:line.
#pragma once

#if !defined(BRIGADE_HAVE_CUDA)
#error "kernels/cuda/vendor.h: the cuBLAS/cuDNN paths exist only in CUDA builds"
#endif

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/math_mode.h"
#include "kernels/shapes.h"

namespace brigade {
class Stream;
}

namespace brigade::cuda::vendor {

// ---- cuBLAS (cublas_gemm.cpp) --------------------------------------------------------------
// C (M, N) = alpha · op(A) · op(B) + beta · C, row-major: gemm_tiled's contract (gemm.h).
// In math mode fp32 (the default, kernels/math_mode.h) FP32 arithmetic, so it agrees with
// gemm_tiled to float rounding; in tf32 cuBLAS may use tensor cores (inputs rounded to TF32).
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const Stream& stream);

// Precision bf16's GEMM (kernels/precision.h): the same product with A and B in bfloat16 storage
// (the caller narrows them: ops::narrow_to_bf16) and C float, through cublasGemmEx with A, B
// CUDA_R_16BF, C CUDA_R_32F and CUBLAS_COMPUTE_32F: each product of two bf16 values is exact,
// the sums are float, on tensor cores where the GPU has them (Ampere and later) — bf16's rule.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const cpu::bf16* A, int64_t lda, const cpu::bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc, const Stream& stream);

// Dense through sgemm (bias and ReLU by the hand-written add_bias_rows); each has a twin below
// taking its two GEMM operands in bfloat16, through gemm_bf16. dense_backward_bias has no GEMM
// in it: use brigade::cuda::dense_backward_bias.
// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out)
void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu = false);
// dy: (N, out)  w: (out, in)  dx: (N, in), overwritten
void dense_backward_data(const float* dy, const float* w, float* dx, int64_t N, int64_t in,
                         int64_t out, const Stream& stream);
// x: (N, in)  dy: (N, out)  dw: (out, in), accumulated
void dense_backward_weight(const float* x, const float* dy, float* dw, int64_t N, int64_t in,
                           int64_t out, const Stream& stream);
// The same three in precision bf16: x, w and dy in bfloat16 storage; b, y, dx and dw float.
// `round_bf16`: y rounded to bf16 values by add_bias_rows, which writes it after the GEMM.
void dense_forward(const cpu::bf16* x, const cpu::bf16* w, const float* b, float* y, int64_t N,
                   int64_t in, int64_t out, const Stream& stream, bool relu = false,
                   bool round_bf16 = false);
void dense_backward_data(const cpu::bf16* dy, const cpu::bf16* w, float* dx, int64_t N,
                         int64_t in, int64_t out, const Stream& stream);
void dense_backward_weight(const cpu::bf16* x, const cpu::bf16* dy, float* dw, int64_t N,
                           int64_t in, int64_t out, const Stream& stream);

// ---- cuDNN convolution (cudnn_conv.cpp) ----------------------------------------------------
// `math`: the math the passes may compute in (kernels/math_mode.h), the process's mode unless
// the caller knows better (ops::conv2d_* in precision bf16: TF32 tensor cores, exact on bf16
// values). The workspace and the passes of one convolution take the same.
// Bytes of workspace every conv2d_* call below needs for shape s on the stream's device:
// the largest of the three passes' best-ranked algorithms (cuDNN's heuristics, deterministic
// algorithms of the math mode's math only: FMA in fp32, tensor-op TF32 too in tf32; cached
// per shape, device and mode). A pass whose best is refused at
// execution falls back to the next that runs within this workspace.
size_t conv2d_workspace_bytes(const Conv2dShape& s, const Stream& stream,
                              MathMode math = math_mode());
// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q); relu fuses max(y, 0)
void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, void* workspace, size_t workspace_bytes,
                    const Stream& stream, bool relu = false, MathMode math = math_mode());
// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten
void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          void* workspace, size_t workspace_bytes, const Stream& stream,
                          MathMode math = math_mode());
// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), accumulated
void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            void* workspace, size_t workspace_bytes, const Stream& stream,
                            MathMode math = math_mode());
// dy: (N, K, P, Q)  db: (K), accumulated
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream);

// ---- cuDNN max pooling (cudnn_pool.cpp) ----------------------------------------------------
// x: (N, C, H, W)  y: (N, C, P, Q)
void maxpool2d_forward(const float* x, float* y, const Pool2dShape& s, const Stream& stream);
// x, dx: (N, C, H, W)  y, dy: (N, C, P, Q); dx overwritten
void maxpool2d_backward(const float* x, const float* y, const float* dy, float* dx,
                        const Pool2dShape& s, const Stream& stream);

}  // namespace brigade::cuda::vendor

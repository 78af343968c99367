// Conv2D in precision bf16 (kernels/precision.h), the CPU path: im2col + gemm_bf16
// (kernels/cpu/gemm_bf16.h) per group of samples, groups handed to the device's threads, or
// the float path's own faster algorithm on rounded operands (below).
//
// The rule, per pass: both operands of the GEMM are rounded to bf16 (to nearest, ties to
// even), the products summed in float; bias, ReLU, col2im's sums and dw's running sum across
// micro-batches stay float.
//   forward          y  (K, nb·PQ)  = bf16(w) (K, CRS) · bf16(col(x)), then + b, ReLU  float
//   backward-data    col (CRS, nb·PQ) = bf16(w)ᵀ · bf16(dy), dx = col2im(col)           float
//   backward-filter  dw (K, CRS)   += bf16(dy) · bf16(col(x))ᵀ                          float
//   backward-bias    db += sums of dy: no GEMM, in float (conv2d.h's, unchanged)
// x is rounded once per call and lowered in bf16 (lowering.h's im2col_ld_bf16): col holds x's
// own values or 0, so its entries are bf16(x). The reference is kernels/reference/conv2d.h in
// double on round_to_bf16(x), round_to_bf16(w).
//
// Where the float path (conv2d.h's ConvAlgorithm) runs the forward or the backward-filter
// pass by Winograd's F(2x2, 3x3) or the direct single-channel kernel, bf16 runs that pass the
// same way: its two operands rounded to bf16 values, kept in float, then the float kernel.
// That is still the rule — the convolution of bf16(x) and bf16(w), in float arithmetic — and
// it is faster: Winograd does 2.25x fewer multiply-adds than im2col, more than vdpbf16ps's
// margin over SGEMM (about 1.5x, docs/benchmarks.md), and the direct kernel avoids a product
// only R·S deep. What is never done is rounding Winograd's transformed tiles to bf16 to
// multiply them with vdpbf16ps: a tile is a sum of several inputs with fractions, not x or w,
// so that would round something other than the operands, with a larger error and a different
// rule per shape. Backward-data keeps im2col + gemm_bf16 on every shape: there it is faster
// than the float path's Winograd. Like the float path, the bits depend on (shape, ISA).
//
// Workspace: conv2d_bf16_workspace_floats(s, pool) floats owned by the caller (nullptr:
// allocated per call), as in conv2d.h; the bf16 buffers (w, x, each worker's col and dy) are
// carved out of it. Results depend
// on the shape alone, never on the pool size (groups and filter chunks cut as in conv2d.h).
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/shapes.h"

namespace brigade::cpu {

int64_t conv2d_bf16_workspace_floats(const Conv2dShape& s, const ThreadPool& pool);

// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q); relu fuses max(y, 0)
void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s, ThreadPool& pool, float* workspace,
                         bool relu = false);

// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten; relu_x as in conv2d.h
void conv2d_backward_data_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                               ThreadPool& pool, float* workspace,
                               const float* relu_x = nullptr);

// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), accumulated (dw += ...)
void conv2d_backward_filter_bf16(const float* x, const float* dy, float* dw,
                                 const Conv2dShape& s, ThreadPool& pool, float* workspace);

}  // namespace brigade::cpu

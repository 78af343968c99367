// Conv2D, the fast CPU path: im2col + SGEMM per group of samples, groups handed to the
// device's threads. Same arithmetic as kernels/reference/conv2d.h up to float summation order.
// A 3x3 stride-1 convolution with 4 or more channels in and out runs all three passes by
// Winograd's F(2x2, 3x3) instead (winograd.h: 2.25x fewer multiply-adds), on every
// ISA. Where the CPU has AVX-512 (cpu_isa.h; BRIGADE_CPU_ISA=portable turns it off), im2col
// and Winograd's transforms run 16 floats at a time, and a single-channel stride-1 forward is
// computed directly, without im2col.
//
// Workspace: every function takes `workspace`, at least conv2d_workspace_floats(s, pool)
// floats, owned by the caller so that a training step allocates nothing; nullptr makes the
// call allocate (and free) its own, which is convenient in tests and slow in a loop. Two calls
// running at the same time (two streams of one device) need two workspaces.
// Results depend on (shape, ISA) only, never on the pool size: groups of samples and
// backward-filter's chunks are cut from the shape alone, and the chunks' partial sums added in
// chunk order (chunks.h). Across batch sizes or ISAs they may differ in the last bits: samples
// are grouped differently per SGEMM, and the direct single-channel forward and Winograd sum in
// other orders than im2col + SGEMM.
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/shapes.h"

namespace brigade::cpu {

// Floats of workspace any conv2d_* call below needs with this pool.
int64_t conv2d_workspace_floats(const Conv2dShape& s, const ThreadPool& pool);

// What conv2d_forward and conv2d_backward_filter run for a shape on this CPU's ISA (above):
// precision bf16 (bf16.h) runs the passes whose float algorithm is not im2col + SGEMM through
// that algorithm, on operands rounded to bf16 values.
enum class ConvAlgorithm { im2col_sgemm, winograd, direct };
ConvAlgorithm conv2d_forward_algorithm(const Conv2dShape& s);
ConvAlgorithm conv2d_backward_filter_algorithm(const Conv2dShape& s);

// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q)
// relu = true fuses y = max(y, 0) into the same pass (Conv2D(..., activation="relu")).
void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, ThreadPool& pool, float* workspace, bool relu = false);

// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten
// relu_x: (N, C, H, W) or nullptr. When the input x is a ReLU's output, passing it here also
// applies that ReLU's backward, dx = relu_x > 0 ? dx : 0 (the bits of relu_backward), to each
// sample right after its col2im, while its dx is still in cache.
void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          ThreadPool& pool, float* workspace, const float* relu_x = nullptr);

// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), accumulated (dw += ...)
void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            ThreadPool& pool, float* workspace);

// dy: (N, K, P, Q)  db: (K), accumulated (db += ...)
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, ThreadPool& pool);

// The im2col lowering and its adjoint, exposed for tests and for kernels/cuda to mirror.
// x: (C, H, W) of one sample -> col: (C·R·S, P·Q); row (c, r, s) holds the input pixel each
// output position reads through tap (r, s) of channel c, or 0 where that falls in padding.
void im2col(const float* x, float* col, const Conv2dShape& s);
// col: (C·R·S, P·Q) -> dx: (C, H, W), overwritten with the sum of the col entries per pixel.
void col2im(const float* col, float* dx, const Conv2dShape& s);

}  // namespace brigade::cpu

// Conv2D by Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): for a 3x3 stride-1 convolution, each 2x2 block of
// outputs ("tile") of each (filter, channel) pair costs 16 multiplications instead of 36.
//
//   U = G g Gᵀ          filter g (3, 3)      -> U (4, 4)    once per call
//   V = Bᵀ d B          input patch d (4, 4) -> V (4, 4)    per channel and tile
//   M[ξ] = U[ξ] · V[ξ]  for each of the 16 positions ξ: an SGEMM (K, C) · (C, tiles)
//   y = Aᵀ M A          M (4, 4) -> the tile's 2x2 outputs
//
// with Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1],
// Aᵀ = [1 1 1 0; 0 1 -1 -1]. The 16 SGEMMs are (K, C) · (C, T) over T tiles of a group of
// samples: 2.25x fewer multiply-adds than im2col + SGEMM, for three passes over memory that
// only add and halve (the transforms, winograd_tiles.h).
//
// Backward-data is the same algorithm: dx is the "full" correlation of dy with the filters
// turned 180° and with K and C swapped — a forward convolution of dy (data_shape below).
// Backward-filter runs the forward backwards: the gradient reaching M is dM = A dY Aᵀ for
// each tile's 2x2 output gradient dY, then dU[ξ] (K, C) = Σ over tiles dM[ξ] · V[ξ]ᵀ (16
// SGEMMs, T deep), and dw = Gᵀ dU G.
//
// Numerics: the transforms' coefficients are 0, ±½ and ±1, so F(2x2, 3x3) rounds about as a
// direct sum does: tests/kernels/cpu/conv2d_test.cpp holds it to the same tolerance as
// im2col + SGEMM, and after 50 training steps it is closer to float64 PyTorch than float32
// PyTorch is (tools/compare). A non-finite input spreads to the whole 2x2 tile of every
// output it touches, not only to the outputs whose window holds it (the pipeline's
// finiteness check sees it either way).
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/shapes.h"

namespace brigade::cpu::winograd {

// Whether s runs as F(2x2, 3x3) (forward and backward-filter; backward-data asks about
// data_shape(s)): a 3x3 window at stride 1, enough channels that the 16 SGEMMs are more than
// a copy (C >= 4 and K >= 4), and outputs that fill their tiles (at least 3/4 of the tiles'
// cells are outputs: not the question's conv2d_4, whose 3x3 outputs take 2x2 tiles of 2x2).
bool applies(const Conv2dShape& s);

// The forward convolution that computes s's backward-data: input dy (N, K, P, Q), filters
// (C, K, 3, 3) = w turned 180° with K and C swapped, padding 2 - s.pad, output (N, C, H, W).
Conv2dShape data_shape(const Conv2dShape& s);

// Floats of workspace the three functions below need with this pool (0 where none applies);
// each takes `workspace`, at least that many floats (conv2d.cpp supplies it).
int64_t workspace_floats(const Conv2dShape& s, const ThreadPool& pool);

// y (N, K, P, Q) = x ⋆ w + b (b may be nullptr), max(y, 0) when relu.  x: (N, C, H, W)
// w: (K, C, 3, 3). Requires applies(s).
void forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
             ThreadPool& pool, float* workspace, bool relu);

// dw (K, C, 3, 3) += the filter gradient of s's convolution. Requires applies(s). The batch
// is summed in up to 8 chunks of samples, whichever thread is free taking the next, and the
// chunks' sums are added in chunk order: the same bits on any number of threads.
void backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                     ThreadPool& pool, float* workspace);

// dx (N, C, H, W) = the input gradient of s's convolution, overwritten; masked by
// relu_x > 0 when relu_x is given. Requires applies(data_shape(s)).
void backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                   ThreadPool& pool, float* workspace, const float* relu_x);

}  // namespace brigade::cpu::winograd

// The AVX-512 kernels of Conv2D (compiled for AVX-512F with a target attribute; called only
// when kernel_isa() is avx512). im2col is declared in lowering.h;
// here is the direct forward kernel for a single input channel, where im2col would feed SGEMM a
// product only R·S deep (the question's first layer: 9). Its backward-filter stays on im2col +
// SGEMM: a direct AVX-512 version (16 lanes per tap, reduced per sample) measured 1.3x slower.
// And the bias gradient's sixteen lanes in one register.
#pragma once

#include <cstdint>

#include "kernels/shapes.h"

namespace brigade::cpu::avx512 {

// One sample of a single-channel (C = 1), stride-1 convolution, computed directly.
// xs: the sample's input with its padding in place, (P + R - 1) rows of ld_x floats, the first
// Q + S - 1 of each used.  w: (K, R·S)  b: (K) or nullptr  y: (K, P, Q), overwritten.
// Each output is bias + the taps in (r, s) order, one fused multiply-add each.
void conv1ch_forward(const float* xs, int64_t ld_x, const float* w, const float* b, float* y,
                     const Conv2dShape& s, bool relu);

// db[k] += the sum of dy (N, K, P, Q) over n, p, q, for k in [k0, k1): sixteen running sums
// in one register, lane l taking the entries i ≡ l (mod 16) of every row, then the lanes
// added pairwise (8, 4, 2, 1 apart). The same bits as the portable loop in conv2d.cpp.
void bias_sums(const float* dy, float* db, const Conv2dShape& s, int64_t k0, int64_t k1);

}  // namespace brigade::cpu::avx512

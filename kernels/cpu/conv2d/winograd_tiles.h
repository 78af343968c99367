// The tile transforms of Winograd's F(2x2, 3x3) (winograd.h), one band at a time: a
// band is one row of tiles of one channel of one sample. Each exists twice, with the same
// arithmetic in the same order: a portable loop over the tiles, and an AVX-512 one that
// takes 16 tiles per vector (kernel_isa() chooses, as everywhere in kernels/cpu).
//
// Tile q of a band covers output columns 2q, 2q + 1 and input columns 2q .. 2q + 3 (padding
// included). ξ = 4·row + column indexes the 16 positions of a transformed tile; the
// transformed values of tile q at position ξ live at out[ξ·ld + q].
#pragma once

#include <cstdint>

namespace brigade::cpu::winograd {

// The 4 input rows of a band, read in place: rows[a] is an input row of W floats, or nullptr
// for a row of padding; column 2q + b of tile q's patch is input column 2q + b - pad_w,
// zero outside [0, W).
struct InputRows {
  const float* rows[4];
  int64_t W, pad_w;
};

// v[ξ·ld + q] = (Bᵀ d B)[ξ] for the tw tiles of a band, d the 4x4 patch of tile q.
void input_band(const InputRows& in, float* v, int64_t ld, int64_t tw, bool avx512);

// Where the outputs of a band go: rows (1 or 2) rows of Q floats at y0 and y0 + Q; bias added,
// then max(0, ·) when relu, or zeroed where mask (same layout as y, or nullptr) is not > 0.
struct OutputRows {
  float* y0;
  int64_t rows, Q;
  float bias;
  bool relu;
  const float* mask;
};

// The outputs Aᵀ M A of the tw tiles of a band, M of tile q at m[ξ·ld + q].
void output_band(const float* m, int64_t ld, int64_t tw, const OutputRows& out, bool avx512);

// dm[ξ·ld + q] = (A dY Aᵀ)[ξ] for the tw tiles of a band, the gradient that flows back from
// the band's outputs to M: dY the 2x2 output gradients of tile q, read from `rows` (1 or 2)
// rows of Q floats at dy0 and dy0 + Q, zero outside them.
void gradient_band(const float* dy0, int64_t rows, int64_t Q, float* dm, int64_t ld, int64_t tw,
                   bool avx512);

}  // namespace brigade::cpu::winograd

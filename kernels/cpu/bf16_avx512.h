// The bf16 kernels on AVX-512 BF16 (called only when use_avx512_bf16(): cpu_isa.h). The same
// bits as their portable twins in bf16.cpp and gemm_bf16.cpp (see bf16.h, gemm_bf16.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/bf16.h"

namespace brigade::cpu::avx512 {

// bf16.h's buffer conversions: vcvtne2ps2bf16 32 floats at a time; vpmovzxwd + a shift back.
void float_to_bf16(const float* x, bf16* y, int64_t n);
void bf16_to_float(const bf16* x, float* y, int64_t n);

// gemm_bf16.h's micro-kernel: tile (8, 32) = Σ over `pairs` K pairs of a_panel · b_panel, from
// zero. a_panel: pairs x 8 rows of (a[i,k], a[i,k+1]) as 32-bit words; b_panel: pairs x 32
// columns of (b[k,j], b[k+1,j]). tile is row-major, 32 floats to a row.
void gemm_bf16_tile(const uint32_t* a_panel, const uint32_t* b_panel, int64_t pairs,
                    float* tile);

}  // namespace brigade::cpu::avx512

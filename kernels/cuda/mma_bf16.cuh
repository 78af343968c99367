// One tensor-core instruction, on a GPU and on the emulator: D = A · B + C for a 16×16 A and a
// 16×8 B of bfloat16, C and D 16×8 float, computed by the 32 lanes of a warp together
// (PTX `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, sm_80 and later). Included by
// gemm_mma.cu after kernels/emu/kernel.h.
//
// Fragments. No lane holds a whole row or column: each holds 8 elements of A, 4 of B and 4 of
// C, two bf16 to a 32-bit register (the lower-indexed element in the low 16 bits). With
// g = lane >> 2 (groupID) and q = lane % 4 (threadID_in_group), per the PTX ISA ("Matrix
// Fragments for mma.m16n8k16 with floating point type"):
//
//   A (16×16, "row": row-major)     B (16×8, "col": column-major)   C, D (16×8)
//   a[0] = A[g    ][2q, 2q+1]       b[0] = B[2q, 2q+1  ][g]         c[0], c[1] = C[g    ][2q, 2q+1]
//   a[1] = A[g + 8][2q, 2q+1]       b[1] = B[2q+8, 2q+9][g]         c[2], c[3] = C[g + 8][2q, 2q+1]
//   a[2] = A[g    ][2q+8, 2q+9]
//   a[3] = A[g + 8][2q+8, 2q+9]
//
//          k: 0 1 | 2 3 | 4 5 | 6 7 | 8 9 |10 11|12 13|14 15           n: 0 1 | 2 3 | 4 5 | 6 7
//   row 0:  lane 0| l 1 | l 2 | l 3 | l 0 | l 1 | l 2 | l 3     row 0:  lane 0| l 1 | l 2 | l 3
//   row 1:  lane 4| l 5 | l 6 | l 7 | l 4 | ...                 ...
//   row 7:  l 28  | l 29| l 30| l 31| l 28| ...                 row 7:  l 28  | l 29| l 30| l 31
//   row 8:  lane 0 again (a[1], a[3])                           row 8:  lane 0 again (c[2], c[3])
//
// and B's column n lies in lanes 4n .. 4n + 3, k = 2q, 2q+1 in b[0] and 2q+8, 2q+9 in b[1].
//
// Arithmetic. A product of two bf16 values (8 significant bits each) is exact in float. How a
// tensor core adds the 16 products and C is not specified beyond "fp32 accumulation" (it may
// align and truncate where an FMA rounds). The emulation adds in float, C first, then the
// products k = 0, 1, ..., 15 in order: one fixed order, so the emulator gives the same bits on
// every run, and a GPU may differ from it in the last bits of a sum (tests compare both with a
// double reference within a tolerance that grows with K, never bit for bit). Inf and NaN
// propagate as in any float sum.
//
// The emulation is the operation written out from the layout above, for the whole warp at
// once: each lane offers its registers to the emulator's warp rendezvous (kernels/emu/emu.h,
// warp_collective), and the last lane to arrive gathers A, B and C from the 32 lanes' fragments
// and writes each lane's four sums back. One rendezvous per instruction: written with warp
// shuffles instead (16 per lane), the emulated GPU tests of the bf16 path took several times
// as long.
#pragma once

#include <cstdint>

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

#if !defined(__CUDACC__)
// The emulator's view of one lane at the instruction: where its registers are.
struct MmaLane {
  float* c;
  const uint32_t* a;
  const uint32_t* b;
};

// The instruction for the whole warp, from its 32 lanes' fragments (the layout above).
inline void mma_bf16_m16n8k16_warp(MmaLane* const* lanes, int count) {
  BRIGADE_CHECK(count == 32, "mma.sync needs a whole warp of 32 lanes, this one has " << count);
  const auto low = [](uint32_t r) { return __uint_as_float(r << 16); };
  const auto high = [](uint32_t r) { return __uint_as_float(r & 0xffff0000u); };
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, q = lane & 3;
    const MmaLane& l = *lanes[lane];
    for (int reg = 0; reg < 4; ++reg) {  // a[reg]: row g + 8·(reg % 2), k from 2q + 8·(reg / 2)
      const int row = g + 8 * (reg % 2), k = 2 * q + 8 * (reg / 2);
      A[row][k] = low(l.a[reg]);
      A[row][k + 1] = high(l.a[reg]);
    }
    for (int reg = 0; reg < 2; ++reg) {  // b[reg]: column g, k from 2q + 8·reg
      const int k = 2 * q + 8 * reg;
      B[k][g] = low(l.b[reg]);
      B[k + 1][g] = high(l.b[reg]);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, q = lane & 3;
    float* c = lanes[lane]->c;
    for (int i = 0; i < 4; ++i) {  // c[i]: row g + 8·(i / 2), column 2q + i % 2
      const int row = g + 8 * (i / 2), col = 2 * q + i % 2;
      float d = c[i];
      for (int k = 0; k < 16; ++k) d += A[row][k] * B[k][col];  // exact products, in k order
      c[i] = d;
    }
  }
}
#endif

// d = a · b + c in place on c, every lane of the (1-D block's) warp together.
__device__ __forceinline__ void mma_bf16_m16n8k16(float c[4], const uint32_t a[4],
                                                  const uint32_t b[2]) {
#if defined(__CUDA_ARCH__)  // device code: sm_80 or later (meson's gpu_arch)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif !defined(__CUDACC__)  // the emulator (nvcc's host pass compiles no device code)
  MmaLane mine{c, a, b};
  warp_collective(mine, mma_bf16_m16n8k16_warp);
#endif
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

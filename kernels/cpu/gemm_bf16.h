// GEMM on bf16 operands with float accumulation, Brigade's own (Debian's OpenBLAS has no
// sbgemm). Row-major, the same arguments as sgemm (gemm.h):
//
//   C (M, N) float = alpha · op(A) · op(B) + beta · C,   op(A): (M, K) bf16, op(B): (K, N) bf16
//
// beta = 0 overwrites C without reading it (NaN in C does not survive), as BLAS does; alpha
// multiplies the sums as computed (alpha = 0 with an Inf in A or B gives NaN: BLAS would not
// have read them).
//
// How the work is blocked (the GotoBLAS/BLIS scheme; kernels/cuda/gemm_tiled.cu is its GPU
// cousin). The instruction at the bottom is AVX-512 BF16's vdpbf16ps: for each of 16 float
// lanes, acc += a[2i+1]·b[2i+1] + a[2i]·b[2i] — a dot product of PAIRS along K. So K is walked
// two at a time, and both operands are packed as 32-bit pairs (k, k+1):
//
//   for each block of kGemmBf16BlockCols columns of C                   (jc)
//     for each block of kGemmBf16BlockDepth along K, IN ORDER            (pc)
//       pack op(B)'s (depth, cols) block: panels of 32 columns, per K pair 32 (b[k,j], b[k+1,j])
//                                         -> 1 MiB at most, read from L2/L3 below
//       for each block of kGemmBf16BlockRows rows                        (ic)
//         pack op(A)'s (rows, depth) block: panels of 8 rows, per K pair 8 (a[i,k], a[i,k+1])
//                                         -> 96 KiB at most, stays in L2
//         for each 32-column panel, each 8-row panel: the micro-kernel
//
// The micro-kernel holds an 8x32 tile of C in 16 zmm registers (8 rows x 2 vectors of 16) and,
// per K pair, loads the B panel's 2 vectors once and broadcasts each row's A pair from
// memory: 16 vdpbf16ps for 2 loads + 8 broadcasts, 16 independent chains to cover the
// instruction's latency. Its B panel (32 columns x 256 deep = 16 KiB) stays in L1 while the
// 8-row A panels stream past it. Edges are padded with zeros in the packed panels (an odd K's
// last pair too) and only the valid part of a tile is written back.
//
// The bits: each element of C is summed in a fixed order that depends only on K: within a
// K block, pair after pair, each pair as (acc + a[k+1]·b[k+1]) + a[k]·b[k] (vdpbf16ps's order,
// every product exact in float), from zero; then C = alpha·acc0 + beta·C for the first block
// and C += alpha·acc for each next one, in K order. So gemm_bf16 on a ThreadPool (which splits
// rows or columns of C, never K) gives the same bits on any thread count, and any block of C
// computed alone gives the bits it has in the whole. The portable micro-kernel makes the same
// float operations in the same order, and gives the same bits as the AVX-512 BF16 one as long
// as no product or partial sum is a float denormal (|x| < 2^-126: vdpbf16ps flushes those to
// zero). Denormal bf16 OPERANDS count as zero on both paths (vdpbf16ps ignores them; the
// packing flushes them for the portable one).
#pragma once

#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/cpu/bf16.h"

namespace brigade::cpu {

// The micro-kernel's tile of C and the cache blocks (see above). Depth is even: K pairs never
// straddle blocks.
inline constexpr int64_t kGemmBf16TileRows = 8;
inline constexpr int64_t kGemmBf16TileCols = 32;
inline constexpr int64_t kGemmBf16BlockDepth = 256;
inline constexpr int64_t kGemmBf16BlockRows = 192;
inline constexpr int64_t kGemmBf16BlockCols = 1024;

// On the calling thread. Packing buffers are per thread, kept for the thread's lifetime
// (grown once to the block sizes above: no allocation per call after the first).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta, float* C,
               int64_t ldc);

// The same product split over the device's threads: fixed chunks of C's rows (or of its
// columns, when it is wider than tall), cut from the shape alone (chunks.h). The same bits
// as the call above, on any thread count.
void gemm_bf16(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc);

}  // namespace brigade::cpu

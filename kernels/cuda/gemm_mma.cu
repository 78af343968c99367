// The bf16 GEMM on tensor cores: precision bf16's matrix product (kernels/precision.h) on the
// hand-written path. The textbook step after gemm_tiled.cu, whose contract it keeps (gemm.h):
//
//   C (M, N) = alpha · op(A) (M, K) · op(B) (K, N) + beta · C      (row-major; gemm_mma.h)
//
// with A and B in bfloat16 storage, C in float, over a batch of products (gemm_args.h) with the
// bias and ReLU applied as C is stored (gemm_common.cuh: the checks and the epilogue both
// GEMMs share).
//
// Why tensor cores. gemm_tiled's threads each do one multiply-add per instruction. A tensor
// core does a whole 16×8×16 product per warp instruction (mma_bf16.cuh: 2048 multiply-adds,
// the operands spread over the warp's registers in a fixed "fragment" layout), several times
// the CUDA cores' rate on sm_80 and later. The kernel's job is to feed it: bring tiles of A and
// B into shared memory, and each warp's fragments from there into registers.
//
// Who computes what. Block (bx, by, bz) owns the 64×64 tile of C at rows by·64 + [0, 64),
// columns bx·64 + [0, 64) of product bz (of product 0 when the batch is summed). Its 128
// threads are four warps in a 2×2 grid; warp w owns the 32×32 sub-tile at rows 32·(w / 2),
// columns 32·(w % 2) of the block's tile: 2×4 m16n8 pieces, 2·4·4 = 32 floats of C per lane,
// in registers for the whole reduction.
//
//        block tile of C, 64 × 64                  one warp's 32 × 32
//        +-----------+-----------+                 +----+----+----+----+
//        |  warp 0   |  warp 1   |                 |16×8|16×8|16×8|16×8|  mi = 0
//        +-----------+-----------+                 +----+----+----+----+
//        |  warp 2   |  warp 3   |                 |16×8|16×8|16×8|16×8|  mi = 1
//        +-----------+-----------+                 +----+----+----+----+  ni = 0 .. 3
//
// The reduction walks K in slices of 32 (and, when the batch is summed, every product's slices
// one after another, as gemm_tiled does). Per slice the block stages op(A)'s 64×32 and op(B)'s
// 32×64 into shared memory as bf16, both K-MAJOR: a[i][k] = op(A)[row0 + i][k0 + k],
// b[j][k] = op(B)[k0 + k][col0 + j]. That is what the fragments want: a lane's A register
// holds two k-neighbours of one row, its B register two k-neighbours of one column, so each
// register is one aligned 32-bit read from a tile row. The staging transposes as needed: the
// 2048 elements of a tile, 16 per thread, are read along the STORED matrix's rows (coalesced
// whatever the transpose): element e = t + 128·r is (outer e / 32, k e % 32) when k runs along
// the stored rows (A, or Bᵀ as stored), (k e / 64, outer e % 64) when it runs down the stored
// columns (Aᵀ, or B). Rows are 32 + 8 bf16 (80 bytes): the fragment reads of a warp (rows
// g = 0..7, words q = 0..3) then fall in 32 distinct banks (row g starts at bank 20·g mod 32).
// Then each warp, per 16-deep half of the slice, reads its two A fragments and four B
// fragments and issues the 2·4 mmas. Two barriers per slice (after staging; before the next
// staging overwrites the tiles), one copy of the tiles (10 KiB): no double buffering and no
// ldmatrix or cp.async, which are the next steps of a faster kernel, not of this lesson.
//
// Edges: elements outside op(A) or op(B) are staged as 0 (adds nothing); lanes whose C
// elements lie outside C store nothing. Any M, N, K >= 0.
//
// Products side by side (gemm_args.h): one C of count·N columns, as in gemm_tiled.cu; a
// thread stages the same column of B's tile in every slice (column t % 64), so its offset in
// its product is found once, and each C element's as it is stored.
//
// Split-K (gemm_split_k.cuh, shared with gemm_tiled.cu): a C of few tiles over a deep K gets
// S blocks per tile, S = gemm_mma_split_k(M, N, K, batch) = max(1, min(128 / tiles, slices /
// 2)) (slices of 32, at least 64 of K per split). Without it the question's dense_1
// backward-data (C 128 × 64 over K = 1500) and dense_2 forward (C 128 × 10) at batch 128 were
// 2 blocks of 47 slices each in series, timed on an H100 at 0.196 and 0.171 ms, 10× and 8×
// cuBLAS's bf16 GEMM; split, they are 2 tiles × 23 blocks of 2 or 3 slices each.
//
// Determinism: each C element is summed in one fixed order (slice by slice, k ascending within
// the mma's own fixed order, products in batch order; split, each partial so over its range,
// then the partials in split order; S from the shape only): the same bits on every launch. A GPU's
// tensor core and the emulator (mma_bf16.cuh) may group a 16-deep step's sum differently, so
// the two agree within a float sum's tolerance, not bit for bit.
//
// Indices: 32-bit when every offset fits (gemm_fits_int32), else a 64-bit instantiation.
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/gemm_split_k.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/mma_bf16.cuh"

// "Unroll this loop" to nvcc: acc and the fragments are indexed by the loops' counters, and
// only unrolled (constant indices) do they stay in registers. Nothing to the host compiler.
#if defined(__CUDACC__)
#define BRIGADE_UNROLL _Pragma("unroll")
#else
#define BRIGADE_UNROLL
#endif

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

constexpr int kMmaBlockM = 64, kMmaBlockN = 64;  // the block's tile of C
static_assert(kMmaBlockM * kMmaBlockN <= kLargestSplitTile, "split-K's scratch holds 128 tiles");
constexpr int kMmaSliceK = 32;                   // the reduction's step: one tile's depth
constexpr int kMmaWarpM = 32, kMmaWarpN = 32;    // a warp's sub-tile
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;  // one instruction's product
constexpr int kMmaThreads = 32 * (kMmaBlockM / kMmaWarpM) * (kMmaBlockN / kMmaWarpN);  // 128
constexpr int kMmaTilePad = 8;  // bf16 after each tile row: conflict-free fragment reads
static_assert(kMmaBlockM == kMmaBlockN, "one staging routine serves A and B");

using MmaTile = uint16_t[kMmaBlockM][kMmaSliceK + kMmaTilePad];  // tile[outer][k], bf16 bits
struct alignas(16) MmaTiles {
  MmaTile a;  // a[i][k] = op(A)[row0 + i][k0 + k]
  MmaTile b;  // b[j][k] = op(B)[k0 + k][col0 + j]
};

// A launch's sizes, offsets of type Index (int32_t when they all fit).
template <class Index>
struct MmaLaunch {
  Index M, N, K, lda, ldb, ldc;
  Index stride_a, stride_b, stride_c, batches;
  float alpha, beta;
  bool trans_a, trans_b, summed;
  bool bias_per_row, relu, round_bf16;
  // Split-K (gemm_split_k.cuh): `splits` blocks per tile of C, blockIdx.z = product · splits +
  // split; `partials` and `tickets` used only when splits > 1.
  Index splits;
  // Products side by side (gemm_args.h, gemm_tiled.cu's header): N = count · side_n columns,
  // mapped by side_by_side_column with stride_b, stride_c. 0: not.
  Index side_n;
};

// The bits of element (r, c) of a stored row-major (rows, cols) bf16 matrix m; 0 outside.
template <class Index>
__device__ __forceinline__ uint16_t load_bf16_bits(const cpu::bf16* m, Index ld, Index rows,
                                                   Index cols, Index r, Index c) {
  return r < rows && c < cols ? m[r * ld + c].bits : uint16_t{0};
}

// Thread t's 16 elements of the slice [k0, k0 + 32) of a tile whose other dimension starts at
// outer0, from stored matrix m (rows, cols), into tile[outer][k]. k_along_rows: k is the stored
// column index (A, or Bᵀ).
template <class Index>
__device__ __forceinline__ void stage_bf16_slice(MmaTile& tile, const cpu::bf16* m, Index ld,
                                                 Index rows, Index cols, bool k_along_rows,
                                                 Index outer0, Index k0, int t) {
  for (int e = t; e < kMmaBlockM * kMmaSliceK; e += kMmaThreads) {
    if (k_along_rows) {
      const int outer = e / kMmaSliceK, k = e % kMmaSliceK;
      tile[outer][k] = load_bf16_bits(m, ld, rows, cols, outer0 + outer, k0 + k);
    } else {
      const int k = e / kMmaBlockM, outer = e % kMmaBlockM;
      tile[outer][k] = load_bf16_bits(m, ld, rows, cols, k0 + k, outer0 + outer);
    }
  }
}

// The slice [k0, k0 + 32) of op(B) = B (not transposed) into tile[j][k] when the products lie
// side by side: thread t stages column t % 64 of the tile (stage_bf16_slice's layout, k
// running down B's columns), at offset `column` of each row (-1: outside C), found once.
template <class Index>
__device__ __forceinline__ void stage_side_by_side_slice(MmaTile& tile, const cpu::bf16* b,
                                                         Index ldb, Index rows, Index column,
                                                         Index k0, int t) {
  for (int e = t; e < kMmaBlockN * kMmaSliceK; e += kMmaThreads) {
    const int k = e / kMmaBlockN, outer = e % kMmaBlockN;  // outer == t % 64
    tile[outer][k] = column >= 0 && k0 + k < rows ? b[(k0 + k) * ldb + column].bits : uint16_t{0};
  }
}

// The 32-bit register of two k-neighbours p[0] (low half) and p[1] (high half), p 4-byte
// aligned: one shared-memory read on a GPU; composed on the emulator (no type punning in C++).
__device__ __forceinline__ uint32_t bf16_pair(const uint16_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 16;
#endif
}

// __launch_bounds__ spells out kMmaThreads: tools/ptxas-check.py reads the number from the
// source.
static_assert(kMmaThreads == 128, "the launch bounds below are the block size");
template <class Index>
__global__ void __launch_bounds__(128)
    gemm_mma_kernel(MmaLaunch<Index> g, const cpu::bf16* A, const cpu::bf16* B, float* C,
                    const float* bias, float* partials, unsigned* tickets) {
  __shared__ MmaTiles tiles;
  const int t = static_cast<int>(threadIdx.x);
  const int warp = t / 32, lane = t % 32;
  const int group = lane >> 2, quad = lane & 3;  // the PTX's groupID, threadID_in_group
  const int warp_row = warp / 2 * kMmaWarpM, warp_col = warp % 2 * kMmaWarpN;
  const Index row0 = static_cast<Index>(blockIdx.y) * kMmaBlockM;
  const Index col0 = static_cast<Index>(blockIdx.x) * kMmaBlockN;
  const Index z = static_cast<Index>(blockIdx.z);
  const Index product = g.summed ? 0 : z / g.splits;  // C's product (split-K: blocks share it)
  const Index k_slices = (g.K + kMmaSliceK - 1) / kMmaSliceK;
  const Index all_slices = g.summed ? k_slices * g.batches : k_slices;
  // This block's contiguous range of the slices: all of them unless K is split.
  const SliceRange<Index> range = split_slices(all_slices, g.splits, z % g.splits);
  // Stored shapes: A is (M, K), or (K, M) when transposed; B is (K, N), or (N, K).
  const Index a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  const Index b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;

  static_assert(kMmaThreads % kMmaBlockN == 0, "a thread stages one column of B's tile");
  const Index b_j = col0 + t % kMmaBlockN;  // side by side: the column of B it stages, mapped
  const Index b_column = g.side_n == 0 || b_j >= g.N
                             ? Index(-1)
                             : side_by_side_column(b_j, g.side_n, g.stride_b);
  float acc[2][4][4] = {};  // acc[mi][ni]: the C fragment of the warp's 16×8 piece (mi, ni)
  for (Index it = range.first; it < range.first + range.count; ++it) {
    const Index b = g.summed ? it / k_slices : product, k0 = it % k_slices * kMmaSliceK;
    stage_bf16_slice(tiles.a, A + b * g.stride_a, g.lda, a_rows, a_cols, !g.trans_a, row0, k0, t);
    if (g.side_n != 0)
      stage_side_by_side_slice(tiles.b, B, g.ldb, g.K, b_column, k0, t);
    else
      stage_bf16_slice(tiles.b, B + b * g.stride_b, g.ldb, b_rows, b_cols, g.trans_b, col0, k0,
                       t);
    __syncthreads();
    BRIGADE_UNROLL
    for (int ks = 0; ks < kMmaSliceK; ks += kMmaK) {
      const int k = ks + 2 * quad;  // this lane's first k in each register
      uint32_t a_frag[2][4], b_frag[4][2];
      BRIGADE_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        const int r = warp_row + mi * kMmaM + group;
        a_frag[mi][0] = bf16_pair(&tiles.a[r][k]);
        a_frag[mi][1] = bf16_pair(&tiles.a[r + 8][k]);
        a_frag[mi][2] = bf16_pair(&tiles.a[r][k + 8]);
        a_frag[mi][3] = bf16_pair(&tiles.a[r + 8][k + 8]);
      }
      BRIGADE_UNROLL
      for (int ni = 0; ni < 4; ++ni) {
        const int c = warp_col + ni * kMmaN + group;
        b_frag[ni][0] = bf16_pair(&tiles.b[c][k]);
        b_frag[ni][1] = bf16_pair(&tiles.b[c][k + 8]);
      }
      BRIGADE_UNROLL
      for (int mi = 0; mi < 2; ++mi)
        BRIGADE_UNROLL
        for (int ni = 0; ni < 4; ++ni) mma_bf16_m16n8k16(acc[mi][ni], a_frag[mi], b_frag[ni]);
    }
    __syncthreads();  // every warp's reads before the next slice is staged over them
  }

  // This lane's outputs inside C: c[i] of piece (mi, ni) is at row group + 8·(i / 2), column
  // 2·quad + i % 2 of the piece.
  const auto outputs = [&](auto&& f) {
    BRIGADE_UNROLL
    for (int mi = 0; mi < 2; ++mi)
      BRIGADE_UNROLL
      for (int ni = 0; ni < 4; ++ni)
        BRIGADE_UNROLL
        for (int i = 0; i < 4; ++i) {
          const Index r = row0 + warp_row + mi * kMmaM + group + 8 * (i / 2);
          const Index c = col0 + warp_col + ni * kMmaN + 2 * quad + i % 2;
          if (r < g.M && c < g.N) f((mi * 4 + ni) * 4 + i, acc[mi][ni][i], r, c);
        }
  };
  // Split-K: publish this block's raw sums; the tile's last block goes on with their sum.
  if (g.splits > 1 && !split_k_gather<2 * 4 * 4>(partials, tickets, g.splits, g.M, g.N, outputs))
    return;

  float* c_product = C + product * g.stride_c;
  outputs([&](int, float& sum, Index r, Index c) {
    gemm_store(c_product + r * g.ldc + side_by_side_column(c, g.side_n, g.stride_c), sum,
               g.alpha, g.beta, bias, g.bias_per_row, g.relu, g.round_bf16, r, c);
  });
}

// One warp, one instruction: the fragments gathered from row-major a (16, 16), b (16, 8) and
// c (16, 8) by the PTX layout (mma_bf16.cuh), each lane's result written to lanes[lane][0..3].
__global__ void mma_bf16_one_warp_kernel(const cpu::bf16* a, const cpu::bf16* b, const float* c,
                                         float* lanes) {
  const int lane = static_cast<int>(threadIdx.x);
  const int group = lane >> 2, quad = lane & 3;
  const auto pair = [](const cpu::bf16* p, int first, int second) {
    return static_cast<uint32_t>(p[first].bits) | static_cast<uint32_t>(p[second].bits) << 16;
  };
  const int k = 2 * quad;
  const uint32_t a_frag[4] = {pair(a, group * 16 + k, group * 16 + k + 1),
                              pair(a, (group + 8) * 16 + k, (group + 8) * 16 + k + 1),
                              pair(a, group * 16 + k + 8, group * 16 + k + 9),
                              pair(a, (group + 8) * 16 + k + 8, (group + 8) * 16 + k + 9)};
  const uint32_t b_frag[2] = {pair(b, k * 8 + group, (k + 1) * 8 + group),
                              pair(b, (k + 8) * 8 + group, (k + 9) * 8 + group)};
  float d[4] = {c[group * 8 + k], c[group * 8 + k + 1], c[(group + 8) * 8 + k],
                c[(group + 8) * 8 + k + 1]};
  mma_bf16_m16n8k16(d, a_frag, b_frag);
  for (int i = 0; i < 4; ++i) lanes[lane * 4 + i] = d[i];
}

namespace {

// The extents are used only where BRIGADE_EXTENT checks them (emulated GPUs), not under nvcc.
template <class Index>
void launch_gemm_mma(const MmaLaunch<int64_t>& w, dim3 grid, const cpu::bf16* A,
                     const cpu::bf16* B, float* C, const float* bias,
                     [[maybe_unused]] const GemmExtents& e, const SplitLaunch& split,
                     const Stream& stream) {
  const auto n = [](int64_t v) { return static_cast<Index>(v); };
  const MmaLaunch<Index> g{n(w.M), n(w.N), n(w.K), n(w.lda), n(w.ldb), n(w.ldc),
                           n(w.stride_a), n(w.stride_b), n(w.stride_c), n(w.batches),
                           w.alpha, w.beta, w.trans_a, w.trans_b, w.summed,
                           w.bias_per_row, w.relu, w.round_bf16, n(w.splits), n(w.side_n)};
  BRIGADE_LAUNCH(gemm_mma_kernel<Index>, grid, kMmaThreads, 0, stream, g,
                 BRIGADE_EXTENT(A, e.a), BRIGADE_EXTENT(B, e.b), BRIGADE_EXTENT(C, e.c),
                 BRIGADE_EXTENT(bias, e.bias),
                 BRIGADE_EXTENT(split.buffers.partials, split.partial_floats),
                 BRIGADE_EXTENT(split.buffers.tickets, split.ticket_count()));
}

}  // namespace

void gemm_mma_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const cpu::bf16* A, int64_t lda, const cpu::bf16* B, int64_t ldb, float beta,
                   float* C, int64_t ldc, const GemmBatch& batch, const GemmEpilogue& epilogue,
                   const Stream& stream) {
  const GemmExtents e = check_gemm_call("gemm_mma_bf16", trans_a, trans_b, M, N, K, lda, ldb,
                                        ldc, batch, epilogue, kMmaBlockM, kMmaBlockN);
  if (M == 0 || N == 0) return;  // C is empty: a grid of zero blocks is an invalid launch
  const GemmLayout layout = gemm_layout(N, batch);  // side by side: one C of count · N
  const bool side = batch.side_by_side;
  // layout.products · splits <= kSplitBlocks
  const SplitLaunch split = split_k_launch(stream, gemm_mma_split_k(M, N, K, batch), layout, M);
  const MmaLaunch<int64_t> wide{M, layout.columns, K, lda, ldb, ldc, batch.stride_a,
                                batch.stride_b, batch.stride_c, side ? 1 : batch.count, alpha,
                                beta, trans_a, trans_b, batch.summed, epilogue.bias_per_row,
                                epilogue.relu, epilogue.round_bf16, split.splits, side ? N : 0};
  const dim3 grid(static_cast<unsigned>((layout.columns + kMmaBlockN - 1) / kMmaBlockN),
                  static_cast<unsigned>((M + kMmaBlockM - 1) / kMmaBlockM),
                  static_cast<unsigned>(layout.products * split.splits));
  if (gemm_fits_int32(e, split.partial_floats, M, layout.columns, K, batch, lda, ldb, ldc,
                      kMmaBlockM))
    launch_gemm_mma<int32_t>(wide, grid, A, B, C, epilogue.bias, e, split, stream);
  else
    launch_gemm_mma<int64_t>(wide, grid, A, B, C, epilogue.bias, e, split, stream);
}

int64_t gemm_mma_split_k(int64_t M, int64_t N, int64_t K, const GemmBatch& batch) {
  return split_k_count(M, N, K, batch, kMmaBlockM, kMmaBlockN, kMmaSliceK);
}

void mma_bf16_one_warp(const cpu::bf16* a, const cpu::bf16* b, const float* c, float* lanes,
                       const Stream& stream) {
  BRIGADE_LAUNCH(mma_bf16_one_warp_kernel, 1, 32, 0, stream, BRIGADE_EXTENT(a, 16 * 16),
                 BRIGADE_EXTENT(b, 16 * 8), BRIGADE_EXTENT(c, 16 * 8),
                 BRIGADE_EXTENT(lanes, 32 * 4));
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

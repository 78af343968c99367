// SGEMM, register-tiled: the matrix product every Dense and Conv2D of kernels/cuda is built on.
// The textbook step after lesson_matmul_tiled.cu (one output per thread, 16×16 tiles):
//
//   C (M, N) = alpha · op(A) (M, K) · op(B) (K, N) + beta · C      (row-major, see gemm.h)
//
// over a batch of products (gemm_args.h), with the bias and ReLU applied as C is stored.
//
// Why register tiles. With one output per thread, each multiply-add needs two shared-memory
// reads: the kernel is bound by shared-memory bandwidth, at a few TFLOP/s. Here a thread owns
// an 8×8 patch of C in 64 registers; per step k of the reduction it reads 8 values of op(A)'s
// column k and 8 of op(B)'s row k from shared memory and does 8·8 = 64 multiply-adds with
// them (an outer product): 16 reads for 64 FMAs instead of 128.
//
// Who computes what. Block (bx, by, bz) owns the 128×128 tile of C at rows by·128 + [0, 128),
// columns bx·128 + [0, 128) of product bz (of product 0 when the batch is summed). Its 256
// threads form a 16×16 grid; thread (tx, ty) owns rows ty·4 + {0..3} and 64 + ty·4 + {0..3}
// and columns tx·4 + {0..3} and 64 + tx·4 + {0..3}: four 4×4 quarters, 64 apart, so that a
// thread reads its 8 values of a tile row as two aligned float4s (the 16 threads of a row of
// the thread grid read 64 consecutive floats, conflict-free; the A tile's reads are
// broadcasts), and neighbouring threads store neighbouring columns of C.
//
// The reduction walks K in slices of 8 (and, when the batch is summed, every product's slices
// one after another: slice `it` is slice it % k_slices of product it / k_slices). A slice of
// op(A) is 128×8 and one of op(B) 8×128: 1024 floats each, four per thread, loaded as one
// float4 where the stored matrix allows (pitch, batch stride and base 16-byte aligned, the
// four inside it), else as four checked floats. The four lie along the STORED matrix's rows
// (coalesced whatever the transpose) and are written into the tile transposed when needed:
//   - k runs along the stored rows (A, or Bᵀ as stored): thread t loads row t/2, the 4
//     columns (t%2)·4 + [0, 4), and writes tile[(t%2)·4 + e][t/2];
//   - k runs down the stored columns (Aᵀ, or B): thread t loads row t/32, columns (t%32)·4 +
//     [0, 4), and writes tile[t/32][(t%32)·4 + e].
// Tiles are stored k-major, tile[k][i], 128 + 4 floats a row: a thread's 8 values for step k
// are then in one row, and the transposed writes of a warp (rows 0 and 4 apart, 16
// columns) land in distinct banks (the pad shifts row 4 by 16 banks).
//
// Double buffering. Two copies of each tile: while the block computes on slice it from one,
// each thread's loads of slice it + 1 are in flight into registers, and are written into the
// other copy after the arithmetic. One __syncthreads per slice suffices: it separates this
// slice's reads of copy it % 2 from the writes into it two slices later, and the writes into
// copy (it + 1) % 2 from next slice's reads.
//
// Edges: loads outside op(A) or op(B) put 0 in the tile (adds nothing); threads whose rows or
// columns lie outside C take part in loads and barriers but store nothing. Any M, N, K >= 0.
//
// Products side by side (gemm_args.h): count products that share A, each of N columns, are
// one launch of count·N columns, tiled as one C; a thread's columns of op(B) and C are mapped
// to (product, column) by side_by_side_column, B's once before the reduction (the columns a
// thread loads are the same in every slice), C's as it stores. float4 loads of B where N is a
// multiple of 4 (a quad then never straddles two products), scalar ones otherwise.
//
// Short C: 64-row tiles. A C of at most 64 rows — a layer of 64 output channels, whose
// forward y_n = W·col_n and filter gradient dw = Σ dy_n·col_nᵀ have M = 64 — would leave
// half of every 128-row tile's multiply-adds on rows that do not exist. For M <= 64 the
// launcher runs the same kernel with a 64×128 tile (kShortBlockM rows, not kBlockM): 128
// threads, an 8×16 grid with the same 8×8 outputs each (rows ty·4 + {0..3} and 32 + ty·4 +
// {0..3}), a slice of op(A) 64×8 (one quad a thread) and of op(B) 8×128 (two quads a
// thread: quad q = t + 128·u is loaded as thread q of the layout above). The grid has as
// many tiles (one row of them), each element the same sum in the same order: the same bits
// as the 128-row tile, for half the arithmetic.
//
// Split-K (gemm_split_k.cuh, shared with gemm_mma.cu): when C has few tiles and K is deep,
// each tile gets S blocks, each reducing a contiguous range of the slices into a partial; the
// tile's last block to finish adds the partials in split order and applies the epilogue. Here
// S = gemm_split_k(M, N, K, batch) = max(1, min(128 / tiles, slices / 8)) (slices of 8, at
// least 64 of K per split). The question's dense_1 backward-data and dense_2 forward at batch
// 128 are each one tile over 188 slices: S = min(128, 23) = 23 blocks, four of 9 slices and
// nineteen of 8, on 23 SMs; the design predicts a critical path of 9 slices and the sum of 22
// partials (dense_1: 22 · 128 · 64 floats, 720 KB, from L2) instead of 188 slices. Measured
// on an H100 (tools/gpu-check.sh's per-op step) while the last block read the partials
// through volatile: 0.156 ms, 14× cuBLAS (the header of gemm_split_k.cuh says why; they are
// now read with __ldcg). The dense layers' weight gradients at batch 128 (K = 128: L = 16,
// T = 12) split in two; a conv's filter gradient summed over the batch (conv2d.cu) splits its
// N·P·Q, and conv2d_4's forward (9 tiles: 1,152 columns side by side over K = 1,152) in 14;
// a shape of many tiles (the larger convolutions' forward) or a shallow K runs unsplit.
//
// Determinism: each C element is a sum in one fixed order, whatever the grid and whichever
// block finishes last: unsplit, slice by slice (k ascending, products in batch order); split,
// each partial so over its range, then the partials in split order. S depends on the shape
// only: the same bits on every launch and every GPU.
//
// Indices: 32-bit when every offset the kernel forms fits in int32 (the launcher checks: the
// last element each operand spans, plus a tile's overhang), else a 64-bit instantiation. A
// 64-bit multiply and the address arithmetic that follows it cost two to four 32-bit
// instructions on a GPU; the 32-bit version is what runs for every shape of the question's
// network.
#include <algorithm>
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/gemm_split_k.cuh"
#include "kernels/cuda/launchers.h"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// The block's tile of C: kBlockN columns, and kBlockM rows, or kShortBlockM for a C of at
// most that many rows (the header's "Short C"). BM below is the one a launch uses.
constexpr int kBlockM = 128, kShortBlockM = 64, kBlockN = 128;
static_assert(kBlockM * kBlockN <= kLargestSplitTile, "split-K's scratch holds 128 such tiles");
constexpr int kSliceK = 8;                   // the reduction's step: one tile's depth
constexpr int kThreadTile = 8;               // a thread's 8×8 outputs
constexpr int kThreadsPerRow = kBlockN / kThreadTile;  // 16
constexpr int kTilePad = 4;  // floats after a tile row: no bank conflict on the transposed writes

// Threads of a block whose tile has BM rows: 256 for 128, 128 for 64.
constexpr int threads_for(int BM) { return BM / kThreadTile * kThreadsPerRow; }
// Quads a thread loads of one slice of a tile with `outer` rows (or columns): the slice is
// outer × 8 floats, 2·outer quads, shared by the block's threads.
constexpr int quads_per_thread(int outer, int threads) { return 2 * outer / threads; }
static_assert(quads_per_thread(kBlockM, threads_for(kBlockM)) == 1 &&
              quads_per_thread(kBlockN, threads_for(kBlockM)) == 1 &&
              quads_per_thread(kShortBlockM, threads_for(kShortBlockM)) == 1 &&
              quads_per_thread(kBlockN, threads_for(kShortBlockM)) == 2,
              "the loads below: every quad of a slice, each thread the same number");

// tile[k][i]: rows of outer + 4 floats (132 or 68), 16-byte multiples.
template <int kOuter>
using Tile = float[kSliceK][kOuter + kTilePad];
// Both copies of both tiles, aligned for the 128-bit accesses.
template <int BM>
struct alignas(16) SharedTiles {
  Tile<BM> a[2];       // a[.][k][i] = op(A)[row0 + i][k0 + k]
  Tile<kBlockN> b[2];  // b[.][k][j] = op(B)[k0 + k][col0 + j]
};

// A launch's sizes, offsets of type Index (int32_t when they all fit, see the header).
template <class Index>
struct GemmLaunch {
  Index M, N, K, lda, ldb, ldc;
  Index stride_a, stride_b, stride_c, batches;
  float alpha, beta;
  bool trans_a, trans_b, summed;
  bool vector_a, vector_b;  // float4 loads allowed for A, B (see vector_loads_allowed)
  bool bias_per_row, relu, round_bf16;
  // Split-K (gemm_split_k.cuh): `splits` blocks per tile of C, blockIdx.z = product · splits +
  // split. With splits > 1, `partials` holds (splits, grid products, M, N) raw sums and
  // `tickets` one counter per tile (zero between launches); both unused otherwise.
  Index splits;
  // Products side by side (gemm_args.h): N = count · side_n columns, one grid product, the
  // columns of op(B) and C mapped by side_by_side_column with stride_b, stride_c. 0: not.
  Index side_n;
};

struct Quad {
  float v[4];
};

// Four consecutive floats at a 16-byte-aligned p: one 128-bit access on a GPU (a quarter of
// a warp's 128-bit shared-memory accesses is served at once, so four consecutive floats per
// lane never conflict), four plain ones on the emulator, which has no float4.
__device__ __forceinline__ Quad read_aligned_quad(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 v = *reinterpret_cast<const float4*>(p);
  return Quad{{v.x, v.y, v.z, v.w}};
#else
  return Quad{{p[0], p[1], p[2], p[3]}};
#endif
}
__device__ __forceinline__ void write_aligned_quad(float* p, const Quad& q) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float4*>(p) = make_float4(q.v[0], q.v[1], q.v[2], q.v[3]);
#else
  for (int e = 0; e < 4; ++e) p[e] = q.v[e];
#endif
}

// Elements (r, c + [0, 4)) of a stored row-major (rows, cols) matrix m of pitch ld; 0 outside.
template <class Index>
__device__ __forceinline__ Quad load_quad(const float* m, Index ld, Index rows, Index cols,
                                          Index r, Index c, bool vector) {
  Quad q{{0.0f, 0.0f, 0.0f, 0.0f}};
  if (r >= rows) return q;
  const float* p = m + r * ld + c;
  if (vector && c + 3 < cols) return read_aligned_quad(p);
  for (int e = 0; e < 4; ++e)
    if (c + e < cols) q.v[e] = p[e];
  return q;
}

// Quad q of the slice [k0, k0 + 8) of a tile with kOuter rows (op(A)) or columns (op(B))
// starting at outer0, from stored matrix m (rows, cols). k_along_rows: k is the stored column
// index (A, or Bᵀ). A slice has 2·kOuter quads: 2 along k per row of the tile, or kOuter / 4
// along a stored row of it per k.
template <int kOuter, class Index>
__device__ __forceinline__ Quad load_slice_quad(const float* m, Index ld, Index rows, Index cols,
                                                bool k_along_rows, Index outer0, Index k0,
                                                bool vector, int q) {
  if (k_along_rows) return load_quad(m, ld, rows, cols, outer0 + q / 2, k0 + q % 2 * 4, vector);
  constexpr int kAcross = kOuter / 4;
  return load_quad(m, ld, rows, cols, k0 + q / kAcross, outer0 + q % kAcross * 4, vector);
}

template <int kOuter>
__device__ __forceinline__ void store_slice_quad(Tile<kOuter>& tile, const Quad& q,
                                                 bool k_along_rows, int index) {
  constexpr int kAcross = kOuter / 4;
  if (!k_along_rows) return write_aligned_quad(&tile[index / kAcross][index % kAcross * 4], q);
  for (int e = 0; e < 4; ++e) tile[index % 2 * 4 + e][index / 2] = q.v[e];
}

// Elements (r, j + [0, 4)) of op(B) = B (not transposed) when the products lie side by side:
// the four columns' offsets, precomputed (-1 outside C); `vector` when the four are one
// aligned float4 of one product. 0 outside.
template <class Index>
__device__ __forceinline__ Quad load_side_by_side_quad(const float* b, Index ldb, Index rows,
                                                       Index r, const Index (&columns)[4],
                                                       bool vector) {
  Quad q{{0.0f, 0.0f, 0.0f, 0.0f}};
  if (r >= rows) return q;
  const float* row = b + r * ldb;
  if (vector && columns[3] >= 0) return read_aligned_quad(row + columns[0]);
  for (int e = 0; e < 4; ++e)
    if (columns[e] >= 0) q.v[e] = row[columns[e]];
  return q;
}

// Row (or column) of a block's tile, kOuter rows (or columns), that a thread's i-th output lies
// in: two groups of 4, kOuter / 2 apart, at 4·(its index in the thread grid).
template <int kOuter>
__device__ __forceinline__ int thread_offset(int i, int thread_index) {
  return (i < 4 ? 0 : kOuter / 2) + thread_index * 4 + i % 4;
}

// f(i, j, r, c) for each of a thread's outputs acc[i][j] that lies inside C, at row r, column
// c (the loops unroll: acc is indexed by constants and stays in registers).
template <int BM, class Index, class F>
__device__ __forceinline__ void for_each_output(Index row0, Index col0, int ty, int tx, Index M,
                                                Index N, F&& f) {
  for (int i = 0; i < kThreadTile; ++i) {
    const Index r = row0 + thread_offset<BM>(i, ty);
    if (r >= M) continue;
    for (int j = 0; j < kThreadTile; ++j) {
      const Index c = col0 + thread_offset<kBlockN>(j, tx);
      if (c < N) f(i, j, r, c);
    }
  }
}

// __launch_bounds__ spells out the larger block, threads_for(kBlockM): tools/ptxas-check.py
// reads the number from the source (the 64-row instantiation launches half as many).
static_assert(threads_for(kBlockM) == 256, "the launch bounds below are the largest block");
template <class Index, int BM>
__global__ void __launch_bounds__(256)
    gemm_tiled_kernel(GemmLaunch<Index> g, const float* A, const float* B, float* C,
                      const float* bias, float* partials, unsigned* tickets) {
  constexpr int kThreads = threads_for(BM);
  constexpr int kQuadsA = quads_per_thread(BM, kThreads);
  constexpr int kQuadsB = quads_per_thread(kBlockN, kThreads);
  __shared__ SharedTiles<BM> tiles;
  const int t = static_cast<int>(threadIdx.x);
  const int tx = t % kThreadsPerRow, ty = t / kThreadsPerRow;
  const Index row0 = static_cast<Index>(blockIdx.y) * BM;
  const Index col0 = static_cast<Index>(blockIdx.x) * kBlockN;
  const Index z = static_cast<Index>(blockIdx.z);
  const Index product = g.summed ? 0 : z / g.splits;  // C's product (split-K: blocks share it)
  const Index k_slices = (g.K + kSliceK - 1) / kSliceK;
  const Index all_slices = g.summed ? k_slices * g.batches : k_slices;
  // This block's contiguous range of the slices: all of them unless K is split.
  const SliceRange<Index> range = split_slices(all_slices, g.splits, z % g.splits);
  const Index first = range.first, slices = range.count;
  // Stored shapes: A is (M, K), or (K, M) when transposed; B is (K, N), or (N, K).
  const Index a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  const Index b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;

  // Products side by side: the offsets of the columns of B this thread loads, the same in
  // every slice (its quads along a row of B, load_slice_quad's layout), found once.
  constexpr int kAcrossB = kBlockN / 4;  // quads along a slice's row of op(B)
  Index b_columns[kQuadsB][4] = {};
  if (g.side_n != 0)
    for (int u = 0; u < kQuadsB; ++u)
      for (int e = 0; e < 4; ++e) {
        const Index j = col0 + (t + u * kThreads) % kAcrossB * 4 + e;
        b_columns[u][e] = j < g.N ? side_by_side_column(j, g.side_n, g.stride_b) : Index(-1);
      }
  // Slice `it`'s quads, on their way from global memory to a tile: this thread's are quads
  // t, t + kThreads, ... of each operand's slice.
  Quad qa[kQuadsA], qb[kQuadsB];
  auto fetch = [&](Index it) {
    const Index b = g.summed ? it / k_slices : product, k0 = it % k_slices * kSliceK;
    for (int u = 0; u < kQuadsA; ++u)
      qa[u] = load_slice_quad<BM>(A + b * g.stride_a, g.lda, a_rows, a_cols, !g.trans_a, row0,
                                  k0, g.vector_a, t + u * kThreads);
    for (int u = 0; u < kQuadsB; ++u) {
      const int q = t + u * kThreads;
      qb[u] = g.side_n != 0
                  ? load_side_by_side_quad(B, g.ldb, g.K, k0 + q / kAcrossB, b_columns[u],
                                           g.vector_b && g.side_n % 4 == 0)
                  : load_slice_quad<kBlockN>(B + b * g.stride_b, g.ldb, b_rows, b_cols,
                                             g.trans_b, col0, k0, g.vector_b, q);
    }
  };
  auto stage = [&](int copy) {
    for (int u = 0; u < kQuadsA; ++u)
      store_slice_quad<BM>(tiles.a[copy], qa[u], !g.trans_a, t + u * kThreads);
    for (int u = 0; u < kQuadsB; ++u)
      store_slice_quad<kBlockN>(tiles.b[copy], qb[u], g.trans_b, t + u * kThreads);
  };

  float acc[kThreadTile][kThreadTile] = {};
  if (slices > 0) {
    fetch(first);
    stage(0);
  }
  __syncthreads();
  for (Index it = 0; it < slices; ++it) {
    const int copy = static_cast<int>(it % 2);
    const bool more = it + 1 < slices;
    if (more) fetch(first + it + 1);  // in flight during the arithmetic below
    for (int k = 0; k < kSliceK; ++k) {
      // This thread's 8 values of op(A)'s column k and of op(B)'s row k: two quads each.
      const Quad a[2] = {read_aligned_quad(&tiles.a[copy][k][ty * 4]),
                         read_aligned_quad(&tiles.a[copy][k][BM / 2 + ty * 4])};
      const Quad b[2] = {read_aligned_quad(&tiles.b[copy][k][tx * 4]),
                         read_aligned_quad(&tiles.b[copy][k][kBlockN / 2 + tx * 4])};
      for (int i = 0; i < kThreadTile; ++i)
        for (int j = 0; j < kThreadTile; ++j) acc[i][j] += a[i / 4].v[i % 4] * b[j / 4].v[j % 4];
    }
    if (more) stage(1 - copy);
    __syncthreads();
  }

  // This thread's outputs inside C, as split_k_gather and the store below visit them.
  const auto outputs = [&](auto&& f) {
    for_each_output<BM>(row0, col0, ty, tx, g.M, g.N, [&](int i, int j, Index r, Index c) {
      f(i * kThreadTile + j, acc[i][j], r, c);
    });
  };
  // Split-K: publish this block's raw sums; the tile's last block goes on with their sum.
  if (g.splits > 1 &&
      !split_k_gather<kThreadTile * kThreadTile>(partials, tickets, g.splits, g.M, g.N, outputs))
    return;

  float* c_product = C + product * g.stride_c;
  outputs([&](int, float& sum, Index r, Index c) {
    gemm_store(c_product + r * g.ldc + side_by_side_column(c, g.side_n, g.stride_c), sum,
               g.alpha, g.beta, bias, g.bias_per_row, g.relu, g.round_bf16, r, c);
  });
}

namespace {

// float4 loads need 16-byte alignment of every quad: the base, the pitch and the batch
// stride must be multiples of 4 floats (a quad starts at a multiple of 4 within its row).
bool vector_loads_allowed(const float* m, int64_t ld, int64_t stride, int64_t count) {
  return reinterpret_cast<uintptr_t>(m) % 16 == 0 && ld % 4 == 0 &&
         (count == 1 || stride % 4 == 0);
}

// The extents are used only where BRIGADE_EXTENT checks them (emulated GPUs), not under nvcc.
template <class Index, int BM>
void launch_gemm(const GemmLaunch<int64_t>& w, const float* A, const float* B, float* C,
                 const float* bias, [[maybe_unused]] const GemmExtents& e,
                 const SplitLaunch& split, const Stream& stream) {
  const auto n = [](int64_t v) { return static_cast<Index>(v); };
  const GemmLaunch<Index> g{n(w.M), n(w.N), n(w.K), n(w.lda), n(w.ldb), n(w.ldc),
                            n(w.stride_a), n(w.stride_b), n(w.stride_c), n(w.batches),
                            w.alpha, w.beta, w.trans_a, w.trans_b, w.summed,
                            w.vector_a, w.vector_b, w.bias_per_row, w.relu, w.round_bf16,
                            n(w.splits), n(w.side_n)};
  const dim3 grid(static_cast<unsigned>((w.N + kBlockN - 1) / kBlockN),
                  static_cast<unsigned>((w.M + BM - 1) / BM),
                  static_cast<unsigned>((w.summed ? 1 : w.batches) * w.splits));
  BRIGADE_LAUNCH((gemm_tiled_kernel<Index, BM>), grid, threads_for(BM), 0, stream, g,
                 BRIGADE_EXTENT(A, e.a), BRIGADE_EXTENT(B, e.b), BRIGADE_EXTENT(C, e.c),
                 BRIGADE_EXTENT(bias, e.bias),
                 BRIGADE_EXTENT(split.buffers.partials, split.partial_floats),
                 BRIGADE_EXTENT(split.buffers.tickets, split.ticket_count()));
}

}  // namespace

void gemm_tiled_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                        float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                        float beta, float* C, int64_t ldc, const GemmBatch& batch,
                        const GemmEpilogue& epilogue, const Stream& stream) {
  const GemmExtents e = check_gemm_call("gemm_tiled", trans_a, trans_b, M, N, K, lda, ldb, ldc,
                                        batch, epilogue, kBlockM, kBlockN);
  if (M == 0 || N == 0) return;  // C is empty: a grid of zero blocks is an invalid launch
  const GemmLayout layout = gemm_layout(N, batch);  // side by side: one C of count · N
  const bool side = batch.side_by_side;
  // layout.products · splits <= kSplitBlocks
  const SplitLaunch split = split_k_launch(stream, gemm_split_k(M, N, K, batch), layout, M);
  const GemmLaunch<int64_t> wide{M, layout.columns, K, lda, ldb, ldc, batch.stride_a,
                                 batch.stride_b, batch.stride_c, side ? 1 : batch.count, alpha,
                                 beta, trans_a, trans_b, batch.summed,
                                 vector_loads_allowed(A, lda, batch.stride_a, batch.count),
                                 vector_loads_allowed(B, ldb, batch.stride_b, batch.count),
                                 epilogue.bias_per_row, epilogue.relu, epilogue.round_bf16,
                                 split.splits, side ? N : 0};
  // The index type, then the tile's rows (the header's "Short C").
  const auto launch = [&](auto index) {
    using Index = decltype(index);
    if (M <= kShortBlockM)
      launch_gemm<Index, kShortBlockM>(wide, A, B, C, epilogue.bias, e, split, stream);
    else
      launch_gemm<Index, kBlockM>(wide, A, B, C, epilogue.bias, e, split, stream);
  };
  if (gemm_fits_int32(e, split.partial_floats, M, layout.columns, K, batch, lda, ldb, ldc,
                      std::max(kBlockM, kBlockN)))
    launch(int32_t{});
  else
    launch(int64_t{});
}

// Tiles of kBlockM rows: for M <= 64 the launch's 64-row tiles are as many (one row of tiles).
int64_t gemm_split_k(int64_t M, int64_t N, int64_t K, const GemmBatch& batch) {
  return split_k_count(M, N, K, batch, kBlockM, kBlockN, kSliceK);
}

void gemm_tiled(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc, const Stream& stream) {
  gemm_tiled_batched(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                     GemmBatch{}, GemmEpilogue{}, stream);
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

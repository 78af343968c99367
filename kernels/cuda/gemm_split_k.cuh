// Split-K, shared by the two hand-written GEMMs (gemm_tiled.cu, gemm_mma.cu): for a C of few
// tiles over a deep K. Included by both .cu files after kernels/emu/kernel.h.
//
// Why. A tile's block walks its K slices one after another, so a C of one tile is one block
// on one SM, however large the GPU. The question's network at batch 128 has two such
// products in Dense:
//   - dense_1 backward-data, C (128 × 64) = dY (128 × 1500) · W (1500 × 64);
//   - dense_2 forward, C (128 × 10) = X (128 × 1500) · Wᵀ;
// and a conv's filter gradient summed over the batch inside the GEMM (conv2d.cu) is a small C
// (K, C·R·S) over the deepest K of all, N·P·Q.
//
// How. Each tile gets S blocks (blockIdx.z = product · S + split); split s reduces a contiguous
// range of the slices (S ranges whose lengths differ by at most one, the longer ones first:
// split_slices) into a raw partial sum, which it writes to a scratch (S, C's products, M, N).
// Then it takes a ticket (atomicAdd on a counter per tile, after a __threadfence that makes
// its partial visible); the tile's last block to arrive (ticket S - 1) resets the counter to
// zero for the next launch, adds the S partials in split order and goes on to the kernel's
// epilogue (alpha, beta, the bias, ReLU): split_k_gather. One launch per GEMM, whatever S
// (the launches of a training step do not grow with the batch).
//
// S = split_k_count(tiles, slices, slice depth), from the shape alone (never the GPU, so every
// device gives the same bits): with T tiles and L slices of depth d (every product's, when
// the batch is summed),
//   S = max(1, min(128 / T, L · d / 64)):
// at most 128 blocks in all (under the SM count of a large GPU; it also bounds the scratch:
// 128 partial tiles of 128 × 128 floats, 8 MiB; and S >= 2 means T <= 64 tickets), and at
// least 64 of K per split, so that a split's partial is small beside its work: 64 multiply-
// adds per element of its tile for the one float it writes, while the last block's sum costs
// S - 1 reads and adds per element.
//
// Determinism: each C element is each partial summed over its range in the kernel's own order,
// then ((p_0 + p_1) + p_2) + ... + p_(S-1), read back by the last block whichever block that
// is. S depends on the shape only: the same bits on every launch and every GPU. (Not the
// unsplit sum's bits: a different shape, such as another batch size for the same layer, may
// split differently.)
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/stream_workspace.h"

namespace brigade {
class Stream;
}

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

// At most this many blocks in a split launch; each split reduces at least this much of K.
constexpr int64_t kSplitBlocks = 128, kMinSplitDepth = 64;

// The largest tile of C a splitting kernel has (gemm_tiled's 128 × 128; gemm_mma's is 64 × 64,
// each checked by a static_assert beside it), so a split launch's partials, (S, C's products,
// M, N) with S · tiles <= kSplitBlocks, never exceed kSplitBlocks tiles of it: 8 MiB.
constexpr int64_t kLargestSplitTile = 128 * 128;
constexpr int64_t kMostPartialFloats = kSplitBlocks * kLargestSplitTile;
static_assert(cuda::kSplitKScratchBytes ==
                  kMostPartialFloats * sizeof(float) + kSplitBlocks * sizeof(unsigned),
              "the memory check's count of a stream's split-K scratch (stream_workspace.h)");

// S for a product of (M, N) over K (gemm_args.h's batch: one C per product, or summed) in a
// kernel whose tiles of C are block_m × block_n and whose slices of K are slice_depth deep.
// 1: no split.
inline int64_t split_k_count(int64_t M, int64_t N, int64_t K, const GemmBatch& batch,
                             int64_t block_m, int64_t block_n, int64_t slice_depth) {
  const GemmLayout layout = gemm_layout(N, batch);
  const int64_t tiles = (M + block_m - 1) / block_m *
                        ((layout.columns + block_n - 1) / block_n) * layout.products;
  const int64_t slices = (K + slice_depth - 1) / slice_depth * (batch.summed ? batch.count : 1);
  if (tiles == 0) return 1;  // an empty C: nothing is launched
  return std::max<int64_t>(1, std::min(kSplitBlocks / tiles,
                                       slices * slice_depth / kMinSplitDepth));
}

// A split launch's scratch on one stream: (S, C's products, M, N) partial sums, and a ticket
// per tile (kSplitBlocks counters, zero between launches). Kept by the stream (Stream::kept,
// as cuBLAS's workspace is) rather than taken per call: the tickets must be zero at a launch's
// start, and a buffer that stays needs clearing once, not a second launch per call. Per
// stream, because launches on one stream run one after another (a launch's tickets are back
// at zero, its partials read, before the next starts), while two streams' launches may
// overlap and must not share them. Made at the stream's first split launch at the largest
// size any launch needs (kMostPartialFloats), and never replaced: a CUDA graph captured with
// the scratch's addresses replays into them for as long as the stream lives, whatever shapes
// ran eagerly in between (pipeline/runtime/device_graphs.h keeps its graphs across a step of
// another shape). A stream's first split launch may be captured: the tickets are then cleared
// outside the graph, so that an eager launch before its first replay finds them at zero.
// gemm_split_k.cu.
struct SplitBuffers {
  float* partials;
  unsigned* tickets;
};
SplitBuffers split_k_scratch(const Stream& stream, int64_t partial_floats);

// A launch's split-K: S blocks per tile, its partials' floats ((S, C's products, M, columns);
// 0 unsplit) and the stream's scratch holding them (null pointers unsplit).
struct SplitLaunch {
  int64_t splits, partial_floats;
  SplitBuffers buffers;
  int64_t ticket_count() const { return buffers.tickets == nullptr ? 0 : kSplitBlocks; }
};
inline SplitLaunch split_k_launch(const Stream& stream, int64_t splits, const GemmLayout& layout,
                                  int64_t M) {
  if (splits <= 1) return {1, 0, {nullptr, nullptr}};
  const int64_t floats = splits * layout.products * M * layout.columns;
  return {splits, floats, split_k_scratch(stream, floats)};
}

// The contiguous range [first, first + count) of the `all` slices that split `split` of
// `splits` reduces: lengths differ by at most one, the first all % splits get one more.
template <class Index>
struct SliceRange {
  Index first, count;
};
template <class Index>
__device__ __forceinline__ SliceRange<Index> split_slices(Index all, Index splits, Index split) {
  const Index per_split = all / splits, extra = all % splits;
  return {split * per_split + (split < extra ? split : extra), per_split + (split < extra ? 1 : 0)};
}

// A split block's meeting with its tile's other blocks, once its own range is reduced. The
// kernel's threads each own kOutputs elements of C; outputs(f) calls f(e, acc, r, c) for each
// of the calling thread's that lies inside C: e in [0, kOutputs) (a constant once the loops
// unroll, so the arrays below stay in registers), acc its running sum, (r, c) its place in C
// (M, N). Returns true in the tile's last block, whose accs then hold the S partials' sum in
// split order; false in the others, which are done. Every thread of the block calls it.
template <int kOutputs, class Index, class Outputs>
__device__ __forceinline__ bool split_k_gather(float* partials, unsigned* tickets, Index splits,
                                               Index M, Index N, Outputs&& outputs) {
  __shared__ bool last_split;  // this block is its tile's last to finish
  const Index z = static_cast<Index>(blockIdx.z);
  const Index grid_product = z / splits, split = z % splits;  // grid_product: C's index
  const Index grid_products = static_cast<Index>(gridDim.z) / splits;
  const Index tile = (grid_product * static_cast<Index>(gridDim.y) +
                      static_cast<Index>(blockIdx.y)) * static_cast<Index>(gridDim.x) +
                     static_cast<Index>(blockIdx.x);
  const Index part_size = M * N;  // one split's partial of one product: (M, N), pitch N
  float* mine = partials + (split * grid_products + grid_product) * part_size;
  outputs([&](int, float& acc, Index r, Index c) { mine[r * N + c] = acc; });
  // Each thread's partial is visible device-wide before the block's ticket is taken, and
  // the last block's reads below come after every other block's ticket (the CUDA
  // programming guide's __threadfence example, "last block" reduction).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&tickets[tile], 1u);
    last_split = ticket == static_cast<unsigned>(splits) - 1;
    // Zero again for the stream's next split launch (atomic: the other blocks' tickets are
    // atomics on it too).
    if (last_split) atomicExch(&tickets[tile], 0u);
    __threadfence();
  }
  __syncthreads();
  if (!last_split) return false;  // the same answer in every thread: last_split is shared
  // Split 0 first, then 1, 2, ...: the fixed order whichever block is last. Each thread sums
  // the elements it stored, so its own split's are its own writes. The others were written by
  // other blocks during this launch: read with __ldcg (ld.global.cg), from L2, where the
  // device's memory is coherent, never from L1, which is not. Not through volatile, as the
  // programming guide's last-block example reads: the compiler keeps volatile loads in
  // program order, each waiting out L2's latency before the next (a thread of gemm_tiled with
  // 23 partials of its 32 elements made 736 such round trips, 0.156 ms on an H100). A
  // partial's loads here are issued together, then added: S round trips.
  for (Index s = 0; s < splits; ++s) {
    const float* part = partials + (s * grid_products + grid_product) * part_size;
    float v[kOutputs] = {};
    outputs([&](int e, float&, Index r, Index c) { v[e] = __ldcg(part + r * N + c); });
    outputs([&](int e, float& acc, Index, Index) { acc = s == 0 ? v[e] : acc + v[e]; });
  }
  return true;
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

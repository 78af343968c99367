// See gemm_bf16.h: the cache blocks, the packing, the portable micro-kernel, the write-back.
#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/chunks.h"
#include "kernels/cpu/cpu_isa.h"

namespace brigade::cpu {

namespace {
constexpr int64_t MR = kGemmBf16TileRows, NR = kGemmBf16TileCols;
static_assert(kGemmBf16BlockDepth % 2 == 0 && kGemmBf16BlockRows % MR == 0 &&
              kGemmBf16BlockCols % NR == 0);

// A micro-kernel: tile (MR, NR) = Σ over `pairs` K pairs, from zero (bf16_avx512.h says how
// the panels are laid out).
using TileKernel = void (*)(const uint32_t* a_panel, const uint32_t* b_panel, int64_t pairs,
                            float* tile);

// The portable micro-kernel: vdpbf16ps's float operations in its order (gemm_bf16.h), the
// upper bf16 of each pair (k + 1) first. Each product of two bf16 is exact in float.
void portable_tile(const uint32_t* a_panel, const uint32_t* b_panel, int64_t pairs,
                   float* tile) {
  float acc[MR][NR] = {};
  for (int64_t p = 0; p < pairs; ++p, a_panel += MR, b_panel += NR)
    for (int64_t r = 0; r < MR; ++r) {
      const float a_even = float_from_bits(a_panel[r] << 16);
      const float a_odd = float_from_bits(a_panel[r] & 0xFFFF0000u);
      for (int64_t j = 0; j < NR; ++j) {
        const float b_even = float_from_bits(b_panel[j] << 16);
        const float b_odd = float_from_bits(b_panel[j] & 0xFFFF0000u);
        acc[r][j] = (acc[r][j] + a_odd * b_odd) + a_even * b_even;
      }
    }
  std::copy(&acc[0][0], &acc[0][0] + MR * NR, tile);
}

// A packed word, two bf16 (k in the low half, k + 1 in the high one), as vdpbf16ps reads its
// operands: a denormal counts as zero, its sign kept (the portable kernel gets it so too).
inline uint32_t flushed(uint32_t pair) {
  const uint32_t keep_lo = (pair & 0x00007F80u) != 0 ? 0x0000FFFFu : 0x00008000u;
  const uint32_t keep_hi = (pair & 0x7F800000u) != 0 ? 0xFFFF0000u : 0x80000000u;
  return pair & (keep_lo | keep_hi);
}
inline uint32_t pair_of(bf16 k_even, bf16 k_odd) {
  return flushed(uint32_t{k_even.bits} | uint32_t{k_odd.bits} << 16);
}
// The two bf16 at x (x[0] at k, x[1] at k + 1) as one word: x[0] lands in the low half.
static_assert(std::endian::native == std::endian::little);
inline uint32_t adjacent_pair(const bf16* x) {
  uint32_t pair;
  std::memcpy(&pair, x, sizeof pair);
  return flushed(pair);
}

// Packs `count` lines of an operand, from line l0, over the depth [k0, k0 + depth) of a block,
// into panels of `width` lines: per K pair, `width` words (x[l, k], x[l, k + 1]). A's lines
// are the rows of op(A); B's are the columns of op(B). x[l, k] is X[l·ld + k] when
// k_contiguous, else X[k·ld + l]. Lines past `count` and the pair past an odd depth (only the
// last block of K has one) are zeros.
void pack_panels(bool k_contiguous, const bf16* X, int64_t ld, int64_t l0, int64_t count,
                 int64_t width, int64_t k0, int64_t depth, uint32_t* out) {
  const int64_t pairs = (depth + 1) / 2, full = depth / 2;
  const bf16 zero{0};
  for (int64_t panel = 0; panel < count; panel += width, out += pairs * width) {
    const int64_t lines = std::min(width, count - panel);
    if (lines < width || depth % 2) std::fill(out, out + pairs * width, 0u);
    if (k_contiguous) {  // each line's pairs are adjacent: read along the line
      for (int64_t l = 0; l < lines; ++l) {
        const bf16* x = X + (l0 + panel + l) * ld + k0;
        for (int64_t p = 0; p < full; ++p) out[p * width + l] = adjacent_pair(x + 2 * p);
        if (depth % 2) out[full * width + l] = pair_of(x[2 * full], zero);
      }
    } else {  // lines adjacent: interleave two rows of K
      const bf16* x = X + k0 * ld + l0 + panel;
      for (int64_t p = 0; p < full; ++p)
        for (int64_t l = 0; l < lines; ++l)
          out[p * width + l] = pair_of(x[2 * p * ld + l], x[(2 * p + 1) * ld + l]);
      if (depth % 2)
        for (int64_t l = 0; l < lines; ++l) out[full * width + l] = pair_of(x[2 * full * ld + l], zero);
    }
  }
}

// The valid (rows, cols) corner of a tile into C: C = alpha·tile + beta·C for the first K
// block (beta 0: C not read), C += alpha·tile after it.
void write_back(const float* tile, int64_t rows, int64_t cols, float alpha, float beta,
                bool first_block, float* C, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* t = tile + r * NR;
    float* c = C + r * ldc;
    if (!first_block)
      for (int64_t j = 0; j < cols; ++j) c[j] += alpha * t[j];
    else if (beta == 0.0f)
      for (int64_t j = 0; j < cols; ++j) c[j] = alpha * t[j];
    else
      for (int64_t j = 0; j < cols; ++j) c[j] = alpha * t[j] + beta * c[j];
  }
}

// The packed blocks of the calling thread, grown to the largest block once.
struct PackBuffers {
  std::vector<uint32_t> a, b;
};
thread_local PackBuffers pack_buffers;

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no products: C = beta·C (beta 0: zeros, C not read)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  const TileKernel tile_kernel = use_avx512_bf16() ? avx512::gemm_bf16_tile : portable_tile;
  PackBuffers& buf = pack_buffers;
  const int64_t max_pairs = std::min(kGemmBf16BlockDepth, round_up(K, 2)) / 2;
  buf.a.resize(static_cast<size_t>(
      std::max<int64_t>(buf.a.size(), max_pairs * std::min(kGemmBf16BlockRows, round_up(M, MR)))));
  buf.b.resize(static_cast<size_t>(
      std::max<int64_t>(buf.b.size(), max_pairs * std::min(kGemmBf16BlockCols, round_up(N, NR)))));
  float tile[MR * NR];

  for (int64_t jc = 0; jc < N; jc += kGemmBf16BlockCols) {
    const int64_t cols = std::min(kGemmBf16BlockCols, N - jc);
    for (int64_t pc = 0; pc < K; pc += kGemmBf16BlockDepth) {  // in K order: the bits
      const int64_t depth = std::min(kGemmBf16BlockDepth, K - pc), pairs = (depth + 1) / 2;
      pack_panels(trans_b, B, ldb, jc, cols, NR, pc, depth, buf.b.data());
      for (int64_t ic = 0; ic < M; ic += kGemmBf16BlockRows) {
        const int64_t rows = std::min(kGemmBf16BlockRows, M - ic);
        pack_panels(!trans_a, A, lda, ic, rows, MR, pc, depth, buf.a.data());
        for (int64_t jr = 0; jr < cols; jr += NR)
          for (int64_t ir = 0; ir < rows; ir += MR) {
            tile_kernel(buf.a.data() + ir * pairs, buf.b.data() + jr * pairs, pairs, tile);
            write_back(tile, std::min(MR, rows - ir), std::min(NR, cols - jr), alpha, beta,
                       pc == 0, C + (ic + ir) * ldc + jc + jr, ldc);
          }
      }
    }
  }
}

void gemm_bf16(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc) {
  // Chunks of at least 64 rows (columns): each chunk packs all of op(B) (op(A)) again.
  constexpr int64_t kGrain = 64;
  if (M >= N) {
    for_each_range(pool, M, kGrain, [&](int64_t i0, int64_t i1) {
      gemm_bf16(trans_a, trans_b, i1 - i0, N, K, alpha, trans_a ? A + i0 : A + i0 * lda, lda, B,
                ldb, beta, C + i0 * ldc, ldc);
    });
  } else {
    for_each_range(pool, N, kGrain, [&](int64_t j0, int64_t j1) {
      gemm_bf16(trans_a, trans_b, M, j1 - j0, K, alpha, A, lda, trans_b ? B + j0 * ldb : B + j0,
                ldb, beta, C + j0, ldc);
    });
  }
}

}  // namespace brigade::cpu

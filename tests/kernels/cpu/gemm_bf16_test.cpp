// The bf16 GEMM (kernels/cpu/gemm_bf16.h) against a reference in double on the very same bf16
// operands, on both paths (AVX-512 BF16 and portable), every layout, edges of every block.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/thread_pool.h"
#include "kernels/cpu/gemm_bf16.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;
using cpu::bf16;

namespace {

struct Problem {
  bool trans_a, trans_b;
  int64_t M, N, K;
  int64_t pad = 3;  // leading dimensions this much above the minimum
  int64_t lda() const { return (trans_a ? M : K) + pad; }
  int64_t ldb() const { return (trans_b ? K : N) + pad; }
  int64_t ldc() const { return N + pad; }
};

// n values uniform in [-1, 1), rounded to bf16 (the operands both sides see).
std::vector<bf16> random_bf16(int64_t n, uint64_t seed) {
  const std::vector<double> v = random_vector(n, seed);
  std::vector<bf16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = cpu::to_bf16(static_cast<float>(v[i]));
  return h;
}

double op(const std::vector<bf16>& X, int64_t ld, bool trans, int64_t r, int64_t c) {
  return cpu::to_float(trans ? X[c * ld + r] : X[r * ld + c]);
}

// alpha · Σ_k op(A)[i,k] · op(B)[k,j] + beta · C0[i,j] in double, and the same on magnitudes.
void reference(const Problem& p, float alpha, const std::vector<bf16>& A,
               const std::vector<bf16>& B, float beta, const std::vector<float>& C0,
               std::vector<double>& want, std::vector<double>& magnitude) {
  want.assign(static_cast<size_t>(p.M * p.N), 0.0);
  magnitude = want;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double t = op(A, p.lda(), p.trans_a, i, k) * op(B, p.ldb(), p.trans_b, k, j);
        s += t;
        m += std::fabs(t);
      }
      const double c = beta == 0.0f ? 0.0 : static_cast<double>(beta) * C0[i * p.ldc() + j];
      want[i * p.N + j] = alpha * s + c;
      magnitude[i * p.N + j] = std::fabs(alpha) * m + std::fabs(c);
    }
}

// C (M, N) of a (M, ldc) buffer, row by row.
std::vector<float> valid_part(const Problem& p, const std::vector<float>& C) {
  std::vector<float> out;
  for (int64_t i = 0; i < p.M; ++i)
    out.insert(out.end(), C.begin() + i * p.ldc(), C.begin() + i * p.ldc() + p.N);
  return out;
}

struct Operands {
  std::vector<bf16> A, B;
  std::vector<float> C0;
};

Operands operands(const Problem& p, uint64_t seed) {
  return {random_bf16((p.trans_a ? p.K : p.M) * p.lda(), seed),
          random_bf16((p.trans_b ? p.N : p.K) * p.ldb(), seed + 1),
          to_float(random_vector(p.M * p.ldc(), seed + 2))};
}

const char* layout(const Problem& p) {
  static const char* names[] = {"NN", "NT", "TN", "TT"};
  return names[(p.trans_a ? 2 : 0) + (p.trans_b ? 1 : 0)];
}

}  // namespace

TEST_CASE("gemm_bf16 on every ISA: every layout, odd sizes, block edges, alpha and beta") {
  // Tolerance: the operands are bf16 on both sides, and a product of two bf16 (8 significant
  // bits each) is exact in float, so bf16's unit roundoff (2^-8) does not enter: what is left
  // is the float accumulation of K exact products (then alpha·sum + beta·C, two roundings
  // more), bounded by (K + 2)·2^-24·Σ|terms| and typically sqrt(K) of that: check.h's
  // 4·sqrt(L)·eps·Σ|terms| with L = K + 2. A product dropped or counted twice is off by about
  // Σ|terms| / K, far above it for every K here (at most 600: 4·sqrt(602)·2^-23 ≈ 1.2e-5
  // against 1/600 ≈ 1.7e-3).
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> sizes = {
      {5, 7, 0},      // no products: C = beta·C
      {1, 1, 1},      // one product, every tile and pair padded
      {7, 33, 5},     // under a tile in rows, one column over two panels, an odd K
      {9, 31, 2},     // one row over a tile, a K of one pair
      {13, 65, 257},  // K one past a depth block: the second block is a single padded pair
      {200, 40, 300}, // rows past a row block (192)
      {3, 1030, 17},  // columns past a column block (1024)
      {64, 96, 600},  // whole tiles, three depth blocks
  };
  struct Scale {
    float alpha, beta;
  };
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    INFO("ISA " << cpu::isa_name(isa) << (cpu::use_avx512_bf16() ? " (AVX-512 BF16)" : ""));
    for (const auto& [M, N, K] : sizes)
      for (int t = 0; t < 4; ++t)
        for (const Scale s : {Scale{1.0f, 0.0f}, Scale{0.5f, -2.0f}, Scale{1.0f, 1.0f}}) {
          const Problem p{t >= 2, t % 2 == 1, M, N, K};
          INFO(layout(p) << " M " << p.M << " N " << p.N << " K " << p.K << " alpha " << s.alpha
                         << " beta " << s.beta);
          Operands o = operands(p, 10 + M + N + K);
          std::vector<double> want, magnitude;
          reference(p, s.alpha, o.A, o.B, s.beta, o.C0, want, magnitude);
          std::vector<float> C = o.C0;
          if (s.beta == 0.0f)  // beta 0 must not read C: NaN there would survive otherwise
            for (float& c : C) c = std::numeric_limits<float>::quiet_NaN();
          cpu::gemm_bf16(p.trans_a, p.trans_b, M, N, K, s.alpha, o.A.data(), p.lda(),
                         o.B.data(), p.ldb(), s.beta, C.data(), p.ldc());
          CHECK(all_close("C", valid_part(p, C).data(), want, sum_tolerance(magnitude, K + 2)));
          // The padding between rows of C is left alone.
          bool padding_kept = true;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = N; j < p.ldc(); ++j)
              padding_kept &= std::isnan(C[i * p.ldc() + j]) || C[i * p.ldc() + j] == o.C0[i * p.ldc() + j];
          CHECK(padding_kept);
        }
  }
}

TEST_CASE("gemm_bf16: the AVX-512 BF16 and the portable micro-kernels give the same bits") {
  // gemm_bf16.h: the portable kernel makes vdpbf16ps's float operations in its order; with
  // operands in [-1, 1) no product or partial sum comes near a float denormal.
  if (!cpu::detected_avx512_bf16()) {
    MESSAGE("this CPU lacks AVX-512 BF16: only the portable path runs");
    return;
  }
  for (int t = 0; t < 4; ++t) {
    const Problem p{t >= 2, t % 2 == 1, 37, 70, 531};
    INFO(layout(p));
    const Operands o = operands(p, 7);
    std::vector<float> fast = o.C0, portable = o.C0;
    {
      ForcedIsa forced(cpu::Isa::avx512);
      cpu::gemm_bf16(p.trans_a, p.trans_b, p.M, p.N, p.K, 0.75f, o.A.data(), p.lda(),
                     o.B.data(), p.ldb(), 0.5f, fast.data(), p.ldc());
    }
    {
      ForcedIsa forced(cpu::Isa::portable);
      cpu::gemm_bf16(p.trans_a, p.trans_b, p.M, p.N, p.K, 0.75f, o.A.data(), p.lda(),
                     o.B.data(), p.ldb(), 0.5f, portable.data(), p.ldc());
    }
    CHECK(same_bits(fast, portable));
  }
}

TEST_CASE("gemm_bf16 on a ThreadPool: the same bits on 1, 2 and 3 threads as on the caller") {
  // Tall (split by rows) and wide (split by columns), each several 64-row (column) chunks.
  for (const auto& [M, N] : {std::pair<int64_t, int64_t>{300, 45}, {20, 333}})
    for (cpu::Isa isa : runnable_isas()) {
      ForcedIsa forced(isa);
      const Problem p{false, true, M, N, 290};
      INFO("ISA " << cpu::isa_name(isa) << " M " << p.M << " N " << p.N);
      const Operands o = operands(p, 3);
      std::vector<float> alone = o.C0;
      cpu::gemm_bf16(false, true, M, N, p.K, 1.0f, o.A.data(), p.lda(), o.B.data(), p.ldb(),
                     1.0f, alone.data(), p.ldc());
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> C = o.C0;
        cpu::gemm_bf16(pool, false, true, M, N, p.K, 1.0f, o.A.data(), p.lda(), o.B.data(),
                       p.ldb(), 1.0f, C.data(), p.ldc());
        CHECK_MESSAGE(same_bits(C, alone), threads << " threads");
      }
    }
}

TEST_CASE("gemm_bf16: denormal bf16 operands count as zero on every ISA, as vdpbf16ps has it") {
  const Problem p{false, false, 5, 40, 9};
  Operands o = operands(p, 21);
  // B scaled by 2^100 (exactly), so that a denormal's products would show: row 0 of A all
  // denormals (its row of C would be about ±2^-33, not 0), every third element elsewhere.
  for (bf16& b : o.B) b = cpu::to_bf16(std::ldexp(cpu::to_float(b), 100));
  std::vector<bf16> flushed = o.A;
  for (size_t i = 0; i < o.A.size(); ++i) {
    if (i % 3 != 0 && static_cast<int64_t>(i) >= p.lda()) continue;
    o.A[i].bits = static_cast<uint16_t>(i % 2 ? 0x0001 : 0x807F);  // ± denormals
    flushed[i].bits = static_cast<uint16_t>(o.A[i].bits & 0x8000);  // ± 0
  }
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    INFO("ISA " << cpu::isa_name(isa));
    std::vector<float> got(o.C0.size()), want(o.C0.size());
    cpu::gemm_bf16(false, false, p.M, p.N, p.K, 1.0f, o.A.data(), p.lda(), o.B.data(),
                   p.ldb(), 0.0f, got.data(), p.ldc());
    cpu::gemm_bf16(false, false, p.M, p.N, p.K, 1.0f, flushed.data(), p.lda(), o.B.data(),
                   p.ldb(), 0.0f, want.data(), p.ldc());
    CHECK(same_bits(got, want));
  }
}

#include "tools/bench/peak.h"

#include <atomic>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemm.h"
#include "tools/bench/timing.h"

namespace brigade::bench {
namespace {

// Each loop runs `iters` rounds of kAcc independent FMA chains (enough chains to cover the
// FMA latency of 4 cycles on two ports), and returns the sum so that nothing is dead code.
// FLOPs per round: kAcc chains x lanes x 2.
constexpr int kAcc = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < kAcc; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it (-Wuninitialized)
  _mm512_storeu_ps(lanes, acc[0]);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < kAcc; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}
#endif

// Anything else: the compiler's own vectorisation of a multiply and an add (no FMA counted
// twice: still 2 FLOPs per lane per round).
float fma_loop_generic(int64_t iters) {
  float acc[kAcc][4];
  for (int i = 0; i < kAcc; ++i)
    for (int l = 0; l < 4; ++l) acc[i][l] = static_cast<float>(i + l) * 1e-3f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i)
      for (int l = 0; l < 4; ++l) acc[i][l] = acc[i][l] * 0.999999f + 1e-7f;
  float s = 0;
  for (int i = 0; i < kAcc; ++i)
    for (int l = 0; l < 4; ++l) s += acc[i][l];
  return s;
}

struct FmaKernel {
  const char* isa;
  int lanes;
  float (*loop)(int64_t);
};

FmaKernel best_fma_kernel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, fma_loop_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", 8, fma_loop_avx2};
#endif
  return {"generic", 4, fma_loop_generic};
}

std::atomic<float> g_sink{0};  // keeps the loops' results alive

}  // namespace

Peak measure_peak(ThreadPool& pool, bool quick) {
  Peak peak;
  peak.threads = pool.size();
  const int T = pool.size();
  const FmaKernel k = best_fma_kernel();
  peak.isa = k.isa;
  const int reps = quick ? 3 : 5;

  // FMA: every thread runs the loop at once; time of the slowest (parallel_for returns then).
  const int64_t iters = quick ? 2'000'000 : 8'000'000;
  const Timing fma = time_calls(
      [&] {
        pool.parallel_for(T, [&](int64_t, int64_t) { g_sink.store(k.loop(iters)); });
      },
      1, reps);
  const double fma_flops = static_cast<double>(T) * static_cast<double>(iters) * kAcc * k.lanes * 2;
  peak.fma_gflops = fma_flops / fma.median_s * 1e-9;

  // SGEMM: one n^3 product per thread, each on its own matrices.
  const int n = quick ? 512 : 1024;
  peak.sgemm_n = n;
  std::vector<std::vector<float>> a(T), b(T), c(T);
  for (int t = 0; t < T; ++t) {
    a[t].assign(static_cast<size_t>(n) * n, 0.5f);
    b[t].assign(static_cast<size_t>(n) * n, 0.25f);
    c[t].assign(static_cast<size_t>(n) * n, 0.0f);
  }
  const Timing gemm = time_calls(
      [&] {
        pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t)
            cpu::sgemm(false, false, n, n, n, 1.0f, a[t].data(), n, b[t].data(), n, 0.0f,
                       c[t].data(), n);
        });
      },
      1, reps);
  peak.sgemm_gflops = static_cast<double>(T) * 2.0 * n * n * n / gemm.median_s * 1e-9;
  return peak;
}

}  // namespace brigade::bench

// The machine's measured peak GFLOP/s on T threads: the yardstick every figure of
// brigade-bench is a fraction of.
//
// Two measurements, each run on all threads of a ThreadPool at once (so hyper-threads sharing
// a core, or a noisy neighbour, show up the way they do for the kernels):
//   fma    a tight loop of independent fused multiply-adds in the widest vectors this CPU has
//          (AVX-512, else AVX2+FMA, else plain SSE multiply + add): what the core can do at
//          best, with no memory traffic at all. This is "peak".
//   sgemm  OpenBLAS's SGEMM (the build brigade links, kernels/cpu/gemm.h) on a large
//          square problem, one per thread: what a well-tuned dense kernel reaches in practice.
#pragma once

#include <string>

#include "engine/thread_pool.h"

namespace brigade::bench {

struct Peak {
  int threads = 0;
  std::string isa;           // "avx512f", "avx2+fma", "sse2"
  double fma_gflops = 0;     // the peak
  double sgemm_gflops = 0;   // OpenBLAS SGEMM n x n x n per thread
  int sgemm_n = 0;
};

// Runs both measurements on `pool` (pool.size() threads), each repeated and the median kept.
// `quick` shortens them (about 0.1 s each instead of 0.5 s).
Peak measure_peak(ThreadPool& pool, bool quick);

}  // namespace brigade::bench

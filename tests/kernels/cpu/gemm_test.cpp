// The one door to the BLAS (kernels/cpu/gemm.h) is called by every thread of every CPU device
// at once, so it must give each call the result it gives alone. Debian's serial OpenBLAS,
// built without locks, does not: linked against it, this test sees 12-32 wrong calls in 14400.
#include <doctest/doctest.h>

#include <atomic>
#include <vector>

#include "engine/thread_pool.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("sgemm: calls from three threads at once each give the result of a call alone") {
  // Winograd backward-filter's products: C (K, C) += A (K, T) · B (C, T)ᵀ on a group of one
  // sample in buffers sized for two (leading dimension 2·T), and a fuller one.
  struct Shape {
    int64_t M, N, K, ld;
  };
  for (const Shape sh : {Shape{16, 64, 25, 50}, Shape{128, 64, 75, 75}}) {
    INFO("C (" << sh.M << ", " << sh.N << ") += A (" << sh.M << ", " << sh.K << ") · B (" << sh.N
               << ", " << sh.K << ")ᵀ, leading dimension " << sh.ld);
    const auto a = to_float(random_vector(sh.M * sh.ld, 1));
    const auto b = to_float(random_vector(sh.N * sh.ld, 2));
    const auto c0 = to_float(random_vector(sh.M * sh.N, 3));
    std::vector<float> want = c0;
    cpu::sgemm(false, true, sh.M, sh.N, sh.K, 1.0f, a.data(), sh.ld, b.data(), sh.ld, 1.0f,
               want.data(), sh.N);

    // Fresh threads each round, as most tests make them: that is how the collisions showed.
    constexpr int kRounds = 300, kCallsPerThread = 16;
    std::atomic<int64_t> wrong{0};
    for (int round = 0; round < kRounds; ++round) {
      ThreadPool pool(3);
      pool.parallel_for(3, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          std::vector<float> c(c0.size());
          for (int call = 0; call < kCallsPerThread; ++call) {
            c = c0;
            cpu::sgemm(false, true, sh.M, sh.N, sh.K, 1.0f, a.data(), sh.ld, b.data(), sh.ld,
                       1.0f, c.data(), sh.N);
            if (c != want) ++wrong;
          }
        }
      });
    }
    CHECK(wrong.load() == 0);
  }
}

// ThreadPool: every index is visited exactly once, ranges are contiguous, errors propagate.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "engine/thread_pool.h"
#include "tests/support/deadline.h"

using brigade::ThreadPool;
using brigade::testing::Deadline;

TEST_CASE("parallel_for visits every index exactly once, for sizes around the thread count") {
  Deadline deadline("parallel_for coverage");
  for (int threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (int64_t n : {0, 1, 2, 3, 6, 7, 8, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) CHECK_MESSAGE(hits[static_cast<size_t>(i)] == 1, "threads=" << threads << " n=" << n << " i=" << i);
    }
  }
}

TEST_CASE("parallel_for respects the grain: no range is smaller than it unless n is") {
  Deadline deadline("parallel_for grain");
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  std::atomic<int64_t> smallest{1 << 30};
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    calls++;
    int64_t cur = smallest.load();
    while (e - b < cur && !smallest.compare_exchange_weak(cur, e - b)) {}
  }, /*grain=*/4);
  CHECK(calls == 3);          // ceil(10 / 4) ranges: 3, 3, 4
  CHECK(smallest.load() == 3);  // k*n/parts bounds differ by at most one
}

TEST_CASE("a nested parallel_for runs inline instead of deadlocking") {
  Deadline deadline("nested parallel_for");
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(3, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(5, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  CHECK(total == 15);
}

TEST_CASE("an exception in any range is rethrown once every range has finished") {
  Deadline deadline("parallel_for exceptions");
  ThreadPool pool(4);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH_AS(pool.parallel_for(4, [&](int64_t b, int64_t) {
                         if (b == 2) throw std::runtime_error("range 2 failed");
                         finished++;
                       }),
                       "range 2 failed", std::runtime_error);
  CHECK(finished == 3);
  // The pool is still usable afterwards.
  std::atomic<int> after{0};
  pool.parallel_for(4, [&](int64_t b, int64_t e) { after += static_cast<int>(e - b); });
  CHECK(after == 4);
}

// Elementwise helpers: CPU path against the reference (each element is one float operation,
// identical on both sides, so the results are bit-identical).
#include <doctest/doctest.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/reference/elementwise.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("add_to, scale, fill, copy: CPU equals reference") {
  ThreadPool pool(3);
  for (int64_t n : {1, 7, 33, 200001}) {
    const auto x = to_float(random_vector(n, 81));
    const auto y0 = to_float(random_vector(n, 82));
    std::vector<float> y = y0, yr = y0;
    cpu::add_to(x.data(), y.data(), n, pool);
    ref::add_to(x.data(), yr.data(), n);
    CHECK(y == yr);
    CHECK(y[n - 1] == x[n - 1] + y0[n - 1]);
    cpu::scale(y.data(), 0.375f, n, pool);
    ref::scale(yr.data(), 0.375f, n);
    CHECK(y == yr);
    cpu::fill(y.data(), 2.5f, n, pool);
    CHECK(y == std::vector<float>(n, 2.5f));
    cpu::copy(x.data(), y.data(), n, pool);
    CHECK(y == x);
  }
}

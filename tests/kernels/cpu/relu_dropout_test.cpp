// ReLU and Dropout: CPU path against the reference (exact: no sums involved), finite
// differences of the reference backward, and dropout's mask properties: independent of how
// the batch is cut into micro-batches, keep fraction within a binomial bound, exact scaling.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/dropout.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/relu.h"
#include "kernels/reference/dropout.h"
#include "kernels/reference/relu.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/cpu/isa.h"

using namespace brigade;
using namespace brigade::test;

TEST_CASE("relu: CPU equals reference; the gradient at exactly 0 is 0; in place works") {
  ThreadPool pool(2);
  for (int64_t n : {1, 7, 33, 100003}) {
    auto x = to_float(random_vector(n, 41));
    x[0] = 0.0f;  // the kink itself
    std::vector<float> y(n), yr(n), dx(n), dxr(n);
    const auto dy = to_float(random_vector(n, 42));
    cpu::relu_forward(x.data(), y.data(), n, pool);
    ref::relu_forward(x.data(), yr.data(), n);
    CHECK(y == yr);
    cpu::relu_backward(y.data(), dy.data(), dx.data(), n, pool);
    ref::relu_backward(yr.data(), dy.data(), dxr.data(), n);
    CHECK(dx == dxr);
    CHECK(dx[0] == 0.0f);
    std::vector<float> inplace = x;
    cpu::relu_forward(inplace.data(), inplace.data(), n, pool);
    CHECK(inplace == yr);
  }
}

TEST_CASE("relu lets NaN through, on the CPU path and in the reference (as PyTorch does)") {
  ThreadPool pool(1);
  const float x[] = {NAN, -1.0f, 2.0f, -NAN, 0.0f};
  float y[5], y_ref[5];
  cpu::relu_forward(x, y, 5, pool);
  ref::relu_forward(x, y_ref, 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(std::isnan(y[i]) == std::isnan(x[i]));
    CHECK(std::isnan(y_ref[i]) == std::isnan(x[i]));
  }
}

TEST_CASE("relu: the reference backward matches finite differences away from the kink") {
  auto x = random_vector(200, 43);
  const auto G = random_vector(200, 44);
  auto loss = [&] {
    std::vector<double> y(x.size());
    ref::relu_forward(x.data(), y.data(), static_cast<int64_t>(x.size()));
    return dot(y, G);
  };
  std::vector<double> y(x.size()), dx(x.size());
  ref::relu_forward(x.data(), y.data(), 200);
  ref::relu_backward(y.data(), G.data(), dx.data(), 200);
  // Skip a band around 0 wider than the step: there the difference quotient straddles the kink.
  CHECK(gradient_matches("x", x, dx, loss, [&](size_t i) { return std::fabs(x[i]) < 1e-3; }));
}

namespace {
const DropoutKey kKey{0x0123456789abcdefull, 17, 2};
}

TEST_CASE("dropout: CPU equals reference, forward and backward, any sample offset and ISA") {
  ThreadPool pool(3);
  // Rows shorter than a block of 64, exactly one, a block and a remainder, many blocks.
  for (cpu::Isa isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (int64_t per_sample : {1, 3, 7, 33, 64, 67, 1500}) {
      INFO("isa " << std::string(cpu::isa_name(isa)) << ", " << per_sample << " per sample");
      const int64_t batch = 5, offset = 11;
      const auto x = to_float(random_vector(batch * per_sample, 45));
      std::vector<float> y(x.size()), yr(x.size()), dx(x.size()), dxr(x.size());
      cpu::dropout_forward(x.data(), y.data(), batch, per_sample, offset, 0.5f, kKey, pool);
      ref::dropout_forward(x.data(), yr.data(), batch, per_sample, offset, 0.5f, kKey);
      CHECK(y == yr);
      cpu::dropout_backward(x.data(), dx.data(), batch, per_sample, offset, 0.5f, kKey, pool);
      ref::dropout_backward(x.data(), dxr.data(), batch, per_sample, offset, 0.5f, kKey);
      CHECK(dx == dxr);
    }
  }
}

TEST_CASE("dropout: a batch of 8 whole or as micro-batches (3, 5) draws the same mask") {
  ThreadPool pool(2);
  const int64_t per_sample = 37;
  const auto x = to_float(random_vector(8 * per_sample, 46, 0.5, 1.5));  // nonzero: 0 = dropped
  std::vector<float> whole(x.size()), parts(x.size());
  cpu::dropout_forward(x.data(), whole.data(), 8, per_sample, 0, 0.25f, kKey, pool);
  cpu::dropout_forward(x.data(), parts.data(), 3, per_sample, 0, 0.25f, kKey, pool);
  cpu::dropout_forward(x.data() + 3 * per_sample, parts.data() + 3 * per_sample, 5, per_sample, 3,
                       0.25f, kKey, pool);
  CHECK(whole == parts);
  // ... and a different step, layer or seed draws a different one.
  for (DropoutKey other : {DropoutKey{kKey.seed, kKey.step + 1, kKey.layer},
                           DropoutKey{kKey.seed, kKey.step, kKey.layer + 1},
                           DropoutKey{kKey.seed ^ (1ull << 40), kKey.step, kKey.layer}}) {
    std::vector<float> y(x.size());
    cpu::dropout_forward(x.data(), y.data(), 8, per_sample, 0, 0.25f, other, pool);
    CHECK(y != whole);
  }
}

TEST_CASE("dropout: keep fraction within a binomial bound of 1 - rate, kept values scaled") {
  ThreadPool pool(2);
  const int64_t batch = 64, per_sample = 1000, n = batch * per_sample;
  const std::vector<float> ones(n, 1.0f);
  for (float rate : {0.25f, 0.5f, 0.9f}) {
    std::vector<float> y(n);
    cpu::dropout_forward(ones.data(), y.data(), batch, per_sample, 0, rate, kKey, pool);
    const float scale = 1.0f / (1.0f - rate);
    int64_t kept = 0, other = 0;
    for (float v : y) {
      kept += v == scale;
      other += v != scale && v != 0.0f;
    }
    CHECK(other == 0);  // every element is dropped (0) or kept and scaled by exactly 1/(1-rate)
    // Kept count ~ Binomial(n, p), p = P(u >= rate) = 1 - rate to within the 2^-24 grid of u.
    // 6 standard deviations (sd <= 127 here): a false failure has probability ~2e-9, while a
    // mask biased by 2% (1280 elements) is > 10 sd away.
    const double p = 1.0 - rate, sd = std::sqrt(n * p * (1 - p));
    INFO("rate " << rate << ": kept " << kept << " of " << n << ", expected " << n * p);
    CHECK(std::fabs(kept - n * p) <= 6 * sd);
  }
  // rate 0 keeps everything unscaled; rate 1 and negative rates are rejected
  std::vector<float> y(n);
  cpu::dropout_forward(ones.data(), y.data(), batch, per_sample, 0, 0.0f, kKey, pool);
  CHECK(y == ones);
  CHECK_THROWS_WITH_AS(cpu::dropout_forward(ones.data(), y.data(), batch, per_sample, 0, 1.0f, kKey, pool),
                       doctest::Contains("dropout: rate must be in [0, 1)"), std::invalid_argument);
  CHECK_THROWS_AS(ref::dropout_forward(ones.data(), y.data(), batch, per_sample, 0, -0.1f, kKey),
                  std::invalid_argument);
}

TEST_CASE("dropout: the reference backward matches finite differences (double)") {
  const int64_t batch = 3, per_sample = 21;
  auto x = random_vector(batch * per_sample, 47);
  const auto G = random_vector(batch * per_sample, 48);
  auto loss = [&] {
    std::vector<double> y(x.size());
    ref::dropout_forward(x.data(), y.data(), batch, per_sample, 4, 0.3f, kKey);
    return dot(y, G);
  };
  std::vector<double> dx(x.size());
  ref::dropout_backward(G.data(), dx.data(), batch, per_sample, 4, 0.3f, kKey);
  CHECK(gradient_matches("x", x, dx, loss));
}

// SGD and Adam/AdamW: the reference against two steps worked by hand from PyTorch's
// documented update rules (torch.optim.SGD / Adam / AdamW), then the CPU path against the
// reference on a large random tensor.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/optimizers.h"
#include "kernels/reference/optimizers.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

namespace {
// One parameter p = 1 with gradients 0.5 then 0.25; returns p after each of two SGD steps.
std::pair<double, double> two_sgd_steps(const SgdParams& h) {
  double p = 1.0, buf = 0.0;
  const double g[2] = {0.5, 0.25};
  double after[2];
  for (int t = 0; t < 2; ++t) {
    ref::sgd_update(&p, &g[t], &buf, 1, h, t == 0);
    after[t] = p;
  }
  return {after[0], after[1]};
}
}  // namespace

TEST_CASE("sgd: two hand-worked steps of each variant (lr 0.1, p 1, g 0.5 then 0.25)") {
  SgdParams h;
  h.lr = 0.1;
  const double lr = 0.1, mu = 0.9;
  {  // plain: p -= lr·g
    auto [p1, p2] = two_sgd_steps(h);
    CHECK(p1 == doctest::Approx(1 - lr * 0.5).epsilon(1e-15));
    CHECK(p2 == doctest::Approx(1 - lr * 0.5 - lr * 0.25).epsilon(1e-15));
  }
  h.momentum = 0.9;
  {  // momentum: buf1 = g1 = 0.5; buf2 = 0.9·0.5 + 0.25 = 0.7
    auto [p1, p2] = two_sgd_steps(h);
    CHECK(p1 == doctest::Approx(1 - lr * 0.5).epsilon(1e-15));
    CHECK(p2 == doctest::Approx(1 - lr * 0.5 - lr * (mu * 0.5 + 0.25)).epsilon(1e-15));
  }
  h.dampening = 0.5;
  {  // dampening applies from the second step: buf2 = 0.9·0.5 + (1 - 0.5)·0.25
    auto [p1, p2] = two_sgd_steps(h);
    CHECK(p1 == doctest::Approx(1 - lr * 0.5).epsilon(1e-15));
    CHECK(p2 == doctest::Approx(1 - lr * 0.5 - lr * (mu * 0.5 + 0.5 * 0.25)).epsilon(1e-15));
  }
  h.dampening = 0.0;
  h.nesterov = true;
  {  // Nesterov: step with g + mu·buf: 0.5 + 0.9·0.5, then 0.25 + 0.9·0.7
    auto [p1, p2] = two_sgd_steps(h);
    const double q1 = 1 - lr * (0.5 + mu * 0.5);
    CHECK(p1 == doctest::Approx(q1).epsilon(1e-15));
    CHECK(p2 == doctest::Approx(q1 - lr * (0.25 + mu * (mu * 0.5 + 0.25))).epsilon(1e-15));
  }
  h.nesterov = false;
  h.weight_decay = 0.1;
  {  // weight decay enters the gradient: g1' = 0.5 + 0.1·1, g2' = 0.25 + 0.1·p1
    const double wd = 0.1;
    auto [p1, p2] = two_sgd_steps(h);
    const double g1 = 0.5 + wd * 1.0, q1 = 1 - lr * g1;
    const double g2 = 0.25 + wd * q1;
    CHECK(p1 == doctest::Approx(q1).epsilon(1e-15));
    CHECK(p2 == doctest::Approx(q1 - lr * (mu * g1 + g2)).epsilon(1e-15));
  }
  h.weight_decay = 0.0;
  h.nesterov = true;
  h.dampening = 0.5;
  CHECK_THROWS_WITH_AS(two_sgd_steps(h), doctest::Contains("Nesterov needs momentum > 0 and dampening 0"),
                       std::invalid_argument);
}

TEST_CASE("adam and adamw: two hand-worked steps (lr 0.1, betas 0.9/0.999, eps 1e-8)") {
  for (bool decoupled : {false, true}) {
    for (double wd : {0.0, 0.01}) {
      INFO((decoupled ? "AdamW" : "Adam") << " weight_decay " << wd);
      AdamParams h;
      h.lr = 0.1;
      h.weight_decay = wd;
      h.decoupled = decoupled;
      const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
      // by hand, PyTorch's _single_tensor_adam with scalars
      double p = 1.0, m = 0.0, v = 0.0;
      const double g[2] = {0.5, 0.25};
      double want[2];
      for (int t = 1; t <= 2; ++t) {
        double gt = g[t - 1];
        if (decoupled) p = p * (1 - lr * wd);
        else gt = gt + wd * p;
        m = b1 * m + (1 - b1) * gt;
        v = b2 * v + (1 - b2) * gt * gt;
        const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        p = p - (lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
        want[t - 1] = p;
      }
      double rp = 1.0, rm = 0.0, rv = 0.0;
      for (int t = 1; t <= 2; ++t) {
        ref::adam_update(&rp, &g[t - 1], &rm, &rv, 1, h, t);
        CHECK(rp == doctest::Approx(want[t - 1]).epsilon(1e-14));
      }
    }
  }
  // First step, no weight decay: m̂ = g, v̂ = g², so the step is lr·g/(|g| + eps) ≈ lr.
  AdamParams h;
  h.lr = 0.1;
  double p = 1.0, m = 0.0, v = 0.0;
  const double g = 0.5;
  ref::adam_update(&p, &g, &m, &v, 1, h, 1);
  CHECK(p == doctest::Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
  CHECK_THROWS_AS(ref::adam_update(&p, &g, &m, &v, 1, h, 0), std::invalid_argument);
}

TEST_CASE("optimizers: the CPU path matches the reference over many elements and 3 steps") {
  ThreadPool pool(2);
  const int64_t n = 100003;  // several ranges, not a multiple of anything
  const auto p0 = to_float(random_vector(n, 71));
  SgdParams sh;
  sh.lr = 0.05;
  sh.momentum = 0.9;
  sh.weight_decay = 1e-4;
  sh.nesterov = true;
  AdamParams ah;
  ah.weight_decay = 0.01;
  ah.decoupled = true;
  std::vector<float> sp = p0, sbuf(n, 0.0f), ap = p0, am(n, 0.0f), av(n, 0.0f);
  std::vector<double> rsp = to_double(p0), rsbuf(n, 0.0), rap = rsp, ram(n, 0.0), rav(n, 0.0);
  for (int t = 1; t <= 3; ++t) {
    const auto g = to_float(random_vector(n, 72 + t));
    const auto gd = to_double(g);
    cpu::sgd_update(sp.data(), g.data(), sbuf.data(), n, sh, t == 1, pool);
    ref::sgd_update(rsp.data(), gd.data(), rsbuf.data(), n, sh, t == 1);
    cpu::adam_update(ap.data(), g.data(), am.data(), av.data(), n, ah, t, pool);
    ref::adam_update(rap.data(), gd.data(), ram.data(), rav.data(), n, ah, t);
  }
  // A handful of float roundings per step on values of order 1: 3 steps · ~8 operations.
  CHECK(all_close("sgd p", sp.data(), rsp, 32 * kFloatEps));
  CHECK(all_close("sgd buf", sbuf.data(), rsbuf, 32 * kFloatEps * 4));  // |buf| grows to ~2.7
  // Adam divides by sqrt(v̂) + eps: for tiny |g| the ratio m/sqrt(v) amplifies relative
  // error, but each update is bounded by lr·(1 + ...) ~ 1e-3, so the absolute error on p stays
  // ~ lr·(relative error of the ratio) + rounding of p.
  CHECK(all_close("adam p", ap.data(), rap, 32 * kFloatEps + 3 * 1e-3 * 1e-4));
}

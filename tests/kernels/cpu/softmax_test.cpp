// Softmax, fused softmax + cross-entropy and accuracy: the CPU path against log-sum-exp in
// long double, the reference backward against finite differences, micro-batch weighting,
// and accuracy on a hand-worked example.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/softmax.h"
#include "kernels/reference/softmax.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

namespace {
// Logits spread over [-20, 20], plus rows shifted by +1000 and -1000: exp of those overflows
// (underflows) in float unless the row maximum is subtracted first.
std::vector<float> make_logits(int64_t N, int64_t classes, uint64_t seed) {
  auto z = to_float(random_vector(N * classes, seed, -20.0, 20.0));
  for (int64_t j = 0; j < classes; ++j) {
    z[j] += 1000.0f;
    if (N > 1) z[classes + j] -= 1000.0f;
  }
  return z;
}
std::vector<int32_t> make_labels(int64_t N, int64_t classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> l(N);
  for (auto& v : l) v = static_cast<int32_t>(gen() % static_cast<uint64_t>(classes));
  return l;
}
}  // namespace

TEST_CASE("softmax_cross_entropy: loss and gradient agree with log-sum-exp in long double") {
  for (int64_t classes : {1, 3, 10, 33}) {
    for (int64_t N : {1, 7, 128}) {
      INFO("N=" << N << " classes=" << classes);
      const auto z = make_logits(N, classes, 61);
      const auto labels = make_labels(N, classes, 62);
      const float norm = static_cast<float>(N + 3);  // a micro-batch's share of a larger batch
      long double loss = 0;
      std::vector<double> dlogits(z.size()), loss_tol_terms;
      double loss_tol = 0;
      for (int64_t n = 0; n < N; ++n) {
        long double m = z[n * classes], sum = 0;
        for (int64_t j = 0; j < classes; ++j) m = std::max<long double>(m, z[n * classes + j]);
        for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<long double>(z[n * classes + j]) - m);
        const long double lse = m + std::log(sum);
        loss += lse - z[n * classes + labels[n]];
        for (int64_t j = 0; j < classes; ++j)
          dlogits[n * classes + j] = static_cast<double>(
              (std::exp(z[n * classes + j] - lse) - (j == labels[n] ? 1 : 0)) / norm);
        // float error: the sum of `classes` exps (relative classes·eps), its log, and the
        // subtraction of the shifted label logit
        loss_tol += (classes + 4) * kFloatEps *
                    (1.0 + std::fabs(static_cast<double>(lse - m)) +
                     std::fabs(static_cast<double>(z[n * classes + labels[n]] - m)));
      }
      std::vector<float> d(z.size());
      const float got = cpu::softmax_cross_entropy(z.data(), labels.data(), d.data(), N, classes, norm);
      CHECK(std::fabs(got - static_cast<double>(loss / norm)) <= loss_tol / norm + kFloatEps * std::fabs(static_cast<double>(loss / norm)));
      // each entry: a softmax value (relative error ~ (classes + 4)·eps) minus 0 or 1, / norm
      CHECK(all_close("dlogits", d.data(), dlogits, (classes + 4) * kFloatEps * 2 / norm));
      // dlogits may alias logits
      std::vector<float> inplace = z;
      cpu::softmax_cross_entropy(inplace.data(), labels.data(), inplace.data(), N, classes, norm);
      CHECK(inplace == d);
    }
  }
}

TEST_CASE("softmax_cross_entropy: micro-batches normalised by the mini-batch add up to it") {
  const int64_t N = 8, classes = 10;
  const auto z = to_double(make_logits(N, classes, 63));
  const auto labels = make_labels(N, classes, 64);
  std::vector<double> d(z.size()), d_parts(z.size());
  const double whole = ref::softmax_cross_entropy(z.data(), labels.data(), d.data(), N, classes, 8.0);
  const double a = ref::softmax_cross_entropy(z.data(), labels.data(), d_parts.data(), 3, classes, 8.0);
  const double b = ref::softmax_cross_entropy(z.data() + 30, labels.data() + 3, d_parts.data() + 30, 5, classes, 8.0);
  CHECK(a + b == doctest::Approx(whole).epsilon(1e-14));
  CHECK(d == d_parts);  // rows are independent: the very same values
}

TEST_CASE("softmax_cross_entropy: a label out of range is reported with its row") {
  const float z[6] = {0, 1, 2, 3, 4, 5};
  const int32_t labels[2] = {1, 3};
  float d[6];
  CHECK_THROWS_WITH_AS(cpu::softmax_cross_entropy(z, labels, d, 2, 3, 2.0f),
                       doctest::Contains("label 3 of row 1 is outside [0, 3)"), std::out_of_range);
}

TEST_CASE("softmax: CPU matches the reference; reference backward matches finite differences") {
  const int64_t N = 7, classes = 10;
  const auto z = make_logits(N, classes, 65);
  std::vector<float> y(z.size());
  std::vector<double> yr(z.size());
  cpu::softmax_forward(z.data(), y.data(), N, classes);
  const auto zd = to_double(z);
  ref::softmax_forward(zd.data(), yr.data(), N, classes);
  // exp and the normalising sum of `classes` terms: relative error ~ (classes + 4)·eps
  std::vector<double> tol(yr.size());
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = (classes + 4) * kFloatEps * (yr[i] + 1e-30);
  CHECK(all_close("softmax", y.data(), yr, tol));
  const auto dyf = to_float(random_vector(N * classes, 66));
  std::vector<float> dx(z.size());
  std::vector<double> dxr(z.size());
  cpu::softmax_backward(y.data(), dyf.data(), dx.data(), N, classes);
  const auto yd = to_double(y), dyd = to_double(dyf);
  ref::softmax_backward(yd.data(), dyd.data(), dxr.data(), N, classes);
  CHECK(all_close("softmax_backward", dx.data(), dxr, (classes + 2) * kFloatEps * 2));

  // finite differences, double, moderate logits
  auto x = random_vector(N * classes, 67, -3, 3);
  const auto G = random_vector(N * classes, 68);
  auto loss = [&] {
    std::vector<double> out(x.size());
    ref::softmax_forward(x.data(), out.data(), N, classes);
    return dot(out, G);
  };
  std::vector<double> out(x.size()), dx_ref(x.size());
  ref::softmax_forward(x.data(), out.data(), N, classes);
  ref::softmax_backward(out.data(), G.data(), dx_ref.data(), N, classes);
  CHECK(gradient_matches("x (softmax)", x, dx_ref, loss));

  const auto labels = make_labels(N, classes, 69);
  auto ce = [&] {
    std::vector<double> d(x.size());
    return ref::softmax_cross_entropy(x.data(), labels.data(), d.data(), N, classes, 5.0);
  };
  std::vector<double> dce(x.size());
  ref::softmax_cross_entropy(x.data(), labels.data(), dce.data(), N, classes, 5.0);
  CHECK(gradient_matches("x (cross-entropy)", x, dce, ce));
}

TEST_CASE("accuracy_count on a hand example, ties to the first largest") {
  const float logits[4 * 3] = {0.1f, 0.7f, 0.2f,   // argmax 1
                               5.0f, -1.0f, 4.0f,  // argmax 0
                               2.0f, 2.0f, 1.0f,   // tie 0/1: 0
                               0.0f, 0.0f, 3.0f};  // argmax 2
  const int32_t labels[4] = {1, 2, 1, 2};          // right, wrong, wrong (tie), right
  CHECK(cpu::accuracy_count(logits, labels, 4, 3) == 2);
  CHECK(ref::accuracy_count(logits, labels, 4, 3) == 2);
}

// Helpers of the kernel tests: random operands, an llm.c-style comparison that prints the
// first mismatches, a comparison of bits, and caffe-style finite-difference gradient checks
// in double precision.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace brigade::test {

constexpr double kFloatEps = std::numeric_limits<float>::epsilon();  // 2^-23

// n values uniform in [lo, hi), reproducible from `seed`.
inline std::vector<double> random_vector(int64_t n, uint64_t seed, double lo = -1.0,
                                         double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(gen);
  return v;
}

// Rounded to float (the fast path's input); the reference then runs on exactly these values.
inline std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}
inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}
inline std::vector<double> abs_of(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// A float sum of L terms whose magnitudes add up to M is off from the exact sum by about
// sqrt(L)·eps·M when rounding errors are independent (and at most L·eps·M). 4·sqrt(L) keeps a
// margin over the typical case while staying far below an error a bug would make.
inline std::vector<double> sum_tolerance(const std::vector<double>& magnitude, int64_t L) {
  std::vector<double> tol(magnitude.size());
  const double k = 4.0 * std::sqrt(static_cast<double>(std::max<int64_t>(L, 1))) * kFloatEps;
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = k * magnitude[i] + 1e-30;
  return tol;
}

// |got - want| <= tol[i] for every i; prints the first five mismatches and the count.
inline bool all_close(const char* what, const float* got, const std::vector<double>& want,
                      const std::vector<double>& tol) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol[i])) {
      if (bad < 5)
        std::printf("  %s[%zu]: got %.9g, want %.9g, |err| %.3g > tol %.3g\n", what, i,
                    static_cast<double>(got[i]), want[i], err, tol[i]);
      ++bad;
    }
  }
  if (bad) std::printf("  %s: %lld of %zu values out of tolerance\n", what,
                       static_cast<long long>(bad), want.size());
  return bad == 0;
}

inline bool all_close(const char* what, const float* got, const std::vector<double>& want,
                      double tol) {
  return all_close(what, got, want, std::vector<double>(want.size(), tol));
}

// Bits, not values: -0 against +0 and NaN against NaN must agree too.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Central differences of the scalar function f at x (x is perturbed in place and restored)
// against the analytic gradient. Relative error |a - n| / max(|a|, |n|, 1) (floored at 1, as in
// caffe's GradientChecker); indices where skip(i) holds are not checked (kinks). At most
// max_checks indices, spread evenly, keep big tensors cheap.
inline bool gradient_matches(const char* what, std::vector<double>& x,
                             const std::vector<double>& analytic,
                             const std::function<double()>& f,
                             const std::function<bool(size_t)>& skip = nullptr,
                             size_t max_checks = 400, double h = 1e-5, double threshold = 1e-6) {
  REQUIRE(x.size() == analytic.size());
  const size_t stride = std::max<size_t>(1, x.size() / max_checks);
  int64_t bad = 0, checked = 0;
  for (size_t i = 0; i < x.size(); i += stride) {
    if (skip && skip(i)) continue;
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f();
    x[i] = keep - h;
    const double down = f();
    x[i] = keep;
    const double numeric = (up - down) / (2 * h);
    const double rel = std::fabs(analytic[i] - numeric) /
                       std::max({std::fabs(analytic[i]), std::fabs(numeric), 1.0});
    ++checked;
    if (!(rel <= threshold)) {
      if (bad < 5)
        std::printf("  d%s[%zu]: analytic %.12g, numeric %.12g, rel err %.3g\n", what, i,
                    analytic[i], numeric, rel);
      ++bad;
    }
  }
  if (bad) std::printf("  d%s: %lld of %lld checked entries wrong\n", what,
                       static_cast<long long>(bad), static_cast<long long>(checked));
  CHECK_MESSAGE(checked > 0, "gradient check of " << what << " checked nothing");
  return bad == 0;
}

// <a, b>: the scalar loss L = <y, G> whose gradient with respect to y is G.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace brigade::test

// Clipping by the global norm (layers/grad_clip.h), on a hand-worked example: gradients
// (3, 0) and (4) have the norm 5 over both parameters, so a bound of 1 scales every gradient
// by 1 / (5 + 1e-6), PyTorch's clip_grad_norm_, and a bound of 10 leaves every bit.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "layers/grad_clip.h"

namespace brigade::layers {
namespace {

struct TwoParameters {
  Parameter a{"a", Tensor::zeros(Shape({2}), Device::cpu(0)),
              Tensor::from_vector({3.0f, 0.0f}, Shape({2}), Device::cpu(0))};
  Parameter b{"b", Tensor::zeros(Shape({1}), Device::cpu(0)),
              Tensor::from_vector({4.0f}, Shape({1}), Device::cpu(0))};
  std::vector<Parameter*> all() { return {&a, &b}; }
};

TEST_CASE("grad_clip: the norm over every parameter at once, PyTorch's coefficient") {
  TwoParameters p;
  const std::vector<double> squares = squared_norms(p.all());
  REQUIRE(squares.size() == 2);
  CHECK(squares[0] == 9.0);
  CHECK(squares[1] == 16.0);
  const double c = clip_coefficient(squares, 1.0);
  CHECK(c == 1.0 / (5.0 + 1e-6));
  scale_gradients(p.all(), c);
  CHECK(p.a.grad.to_vector() == std::vector<float>{static_cast<float>(3.0f * static_cast<float>(c)), 0.0f});
  CHECK(p.b.grad.to_vector() == std::vector<float>{4.0f * static_cast<float>(c)});
  // The clipped gradients have the norm asked for, up to the epsilon and float rounding.
  double norm = 0;
  for (double s : squared_norms(p.all())) norm += s;
  CHECK(std::sqrt(norm) == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("grad_clip: under the bound nothing changes; a bound <= 0 is refused; NaN stays NaN") {
  TwoParameters p;
  CHECK(clip_coefficient(squared_norms(p.all()), 10.0) == 1.0);
  scale_gradients(p.all(), 1.0);
  CHECK(p.a.grad.to_vector() == std::vector<float>{3.0f, 0.0f});
  CHECK(p.b.grad.to_vector() == std::vector<float>{4.0f});
  CHECK_THROWS_AS(clip_coefficient({1.0}, 0.0), Error);
  CHECK(std::isnan(clip_coefficient({std::numeric_limits<double>::quiet_NaN()}, 1.0)));
  CHECK(clip_coefficient({std::numeric_limits<double>::infinity()}, 1.0) == 0.0);
}

}  // namespace
}  // namespace brigade::layers

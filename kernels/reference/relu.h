// ReLU, the reference. y = max(x, 0), and NaN stays NaN (as in PyTorch): `x <= 0` is false for
// NaN, so a NaN reaches the stage's finite check instead of turning into 0.
// Backward reads the OUTPUT y, not the input: dx = dy where y > 0, else 0 — so the gradient
// at exactly x = 0 is 0, and the layer may overwrite its input (y and x may alias).
#pragma once

#include <cstdint>

namespace brigade::ref {

// x, y: (n)
template <class T>
void relu_forward(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= T(0) ? T(0) : x[i];
}

// y, dy, dx: (n); dx may alias dy
template <class T>
void relu_backward(const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

}  // namespace brigade::ref

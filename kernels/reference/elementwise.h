// The small elementwise helpers autodiff and the optimizers need: the reference.
#pragma once

#include <cstdint>

namespace brigade::ref {

// x, y: (n). Gradient accumulation: y += x.
template <class T>
void add_to(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// y: (n). y *= a.
template <class T>
void scale(T* y, T a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

// y: (n). y = a.
template <class T>
void fill(T* y, T a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a;
}

// x, y: (n). y = x. Flatten is a view of the same storage; this copy is for when a
// contiguous duplicate is really needed.
template <class T>
void copy(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

}  // namespace brigade::ref

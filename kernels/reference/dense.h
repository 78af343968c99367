// Dense (fully connected), the reference. y = x · Wᵀ + b with W stored [out, in] like
// PyTorch's nn.Linear, so its safetensors layout is PyTorch's.
#pragma once

#include <cstdint>

namespace brigade::ref {

// x: (N, in)  w: (out, in)  b: (out) or nullptr  y: (N, out)
template <class T>
void dense_forward(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t in, int64_t out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      T acc = b ? b[o] : T(0);
      for (int64_t i = 0; i < in; ++i) acc += x[n * in + i] * w[o * in + i];
      y[n * out + o] = acc;
    }
}

// dy: (N, out)  w: (out, in)  dx: (N, in), overwritten: dx = dy · W
template <class T>
void dense_backward_data(const T* dy, const T* w, T* dx, int64_t N, int64_t in, int64_t out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < in; ++i) {
      T acc = T(0);
      for (int64_t o = 0; o < out; ++o) acc += dy[n * out + o] * w[o * in + i];
      dx[n * in + i] = acc;
    }
}

// x: (N, in)  dy: (N, out)  dw: (out, in), ACCUMULATED: dw += dyᵀ · x (zero it first)
template <class T>
void dense_backward_weight(const T* x, const T* dy, T* dw, int64_t N, int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      T acc = T(0);
      for (int64_t n = 0; n < N; ++n) acc += dy[n * out + o] * x[n * in + i];
      dw[o * in + i] += acc;
    }
}

// dy: (N, out)  db: (out), ACCUMULATED: db += sum over the batch of dy
template <class T>
void dense_backward_bias(const T* dy, T* db, int64_t N, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    T acc = T(0);
    for (int64_t n = 0; n < N; ++n) acc += dy[n * out + o];
    db[o] += acc;
  }
}

}  // namespace brigade::ref

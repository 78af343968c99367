// Conv2D, the reference: the definition written as loops, for any scalar type T.
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} x[n, c, p*stride - pad_h + r, q*stride - pad_w + s] * w[k,c,r,s]
//
// (cross-correlation, as every framework calls "convolution"; out-of-range input is zero).
// The backward functions are the adjoints of that sum: backward-data scatters dy back
// through the same index map, backward-filter and backward-bias sum over the batch.
#pragma once

#include <cstdint>

#include "kernels/shapes.h"

namespace brigade::ref {

// x: (N, C, H, W)  w: (K, C, R, S)  b: (K) or nullptr  y: (N, K, P, Q)
template <class T>
void conv2d_forward(const T* x, const T* w, const T* b, T* y, const Conv2dShape& s) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < s.P; ++p)
        for (int64_t q = 0; q < s.Q; ++q) {
          T acc = b ? b[k] : T(0);
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t r = 0; r < s.R; ++r) {
              const int64_t h = p * s.stride - s.pad_h + r;
              if (h < 0 || h >= s.H) continue;
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t v = q * s.stride - s.pad_w + t;
                if (v < 0 || v >= s.W) continue;
                acc += x[((n * s.C + c) * s.H + h) * s.W + v] * w[((k * s.C + c) * s.R + r) * s.S + t];
              }
            }
          y[((n * s.K + k) * s.P + p) * s.Q + q] = acc;
        }
}

// dy: (N, K, P, Q)  w: (K, C, R, S)  dx: (N, C, H, W), overwritten
template <class T>
void conv2d_backward_data(const T* dy, const T* w, T* dx, const Conv2dShape& s) {
  for (int64_t i = 0; i < s.x_size(); ++i) dx[i] = T(0);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < s.P; ++p)
        for (int64_t q = 0; q < s.Q; ++q) {
          const T g = dy[((n * s.K + k) * s.P + p) * s.Q + q];
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t r = 0; r < s.R; ++r) {
              const int64_t h = p * s.stride - s.pad_h + r;
              if (h < 0 || h >= s.H) continue;
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t v = q * s.stride - s.pad_w + t;
                if (v < 0 || v >= s.W) continue;
                dx[((n * s.C + c) * s.H + h) * s.W + v] += g * w[((k * s.C + c) * s.R + r) * s.S + t];
              }
            }
        }
}

// x: (N, C, H, W)  dy: (N, K, P, Q)  dw: (K, C, R, S), ACCUMULATED (dw += ...), so that the
// micro-batches of one mini-batch add up in place; zero dw before the first.
template <class T>
void conv2d_backward_filter(const T* x, const T* dy, T* dw, const Conv2dShape& s) {
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t r = 0; r < s.R; ++r)
        for (int64_t t = 0; t < s.S; ++t) {
          T acc = T(0);
          for (int64_t n = 0; n < s.N; ++n)
            for (int64_t p = 0; p < s.P; ++p) {
              const int64_t h = p * s.stride - s.pad_h + r;
              if (h < 0 || h >= s.H) continue;
              for (int64_t q = 0; q < s.Q; ++q) {
                const int64_t v = q * s.stride - s.pad_w + t;
                if (v < 0 || v >= s.W) continue;
                acc += x[((n * s.C + c) * s.H + h) * s.W + v] * dy[((n * s.K + k) * s.P + p) * s.Q + q];
              }
            }
          dw[((k * s.C + c) * s.R + r) * s.S + t] += acc;
        }
}

// dy: (N, K, P, Q)  db: (K), ACCUMULATED like dw
template <class T>
void conv2d_backward_bias(const T* dy, T* db, const Conv2dShape& s) {
  for (int64_t k = 0; k < s.K; ++k) {
    T acc = T(0);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t i = 0; i < s.P * s.Q; ++i) acc += dy[(n * s.K + k) * s.P * s.Q + i];
    db[k] += acc;
  }
}

}  // namespace brigade::ref

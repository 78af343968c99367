// Softmax, fused softmax + cross-entropy, and the accuracy count: the reference.
//
// Every row is shifted by its maximum before exponentiating (softmax is invariant to the
// shift, and exp never overflows). The cross-entropy of row n with label l is
//   log(sum_j exp(z_j - m)) - (z_l - m),  m = max_j z_j   (log-sum-exp minus the label's logit)
// and its gradient is (softmax(z) - onehot(l)) / normaliser.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/labels.h"  // check_label

namespace brigade {

namespace ref {

// x, y: (N, classes); y may alias x
template <class T>
void softmax_forward(const T* x, T* y, int64_t N, int64_t classes) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * classes;
    T* yr = y + n * classes;
    T m = xr[0];
    for (int64_t j = 1; j < classes; ++j) m = xr[j] > m ? xr[j] : m;
    T sum = T(0);
    for (int64_t j = 0; j < classes; ++j) {
      yr[j] = std::exp(xr[j] - m);
      sum += yr[j];
    }
    for (int64_t j = 0; j < classes; ++j) yr[j] /= sum;
  }
}

// y, dy, dx: (N, classes): dx = y ⊙ (dy - <dy, y>) row by row (the softmax Jacobian)
template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t N, int64_t classes) {
  for (int64_t n = 0; n < N; ++n) {
    T dot = T(0);
    for (int64_t j = 0; j < classes; ++j) dot += dy[n * classes + j] * y[n * classes + j];
    for (int64_t j = 0; j < classes; ++j)
      dx[n * classes + j] = y[n * classes + j] * (dy[n * classes + j] - dot);
  }
}

// logits, dlogits: (N, classes)  labels: (N). Returns sum_n loss_n / normaliser and writes
// dlogits = (softmax - onehot) / normaliser (dlogits may alias logits). For the mean over a
// mini-batch of B samples cut into micro-batches, pass normaliser = B for every micro-batch:
// the micro-batch losses and gradients then add up to the mini-batch's.
template <class T>
T softmax_cross_entropy(const T* logits, const int32_t* labels, T* dlogits, int64_t N,
                        int64_t classes, T normaliser) {
  T total = T(0);
  for (int64_t n = 0; n < N; ++n) {
    check_label(labels[n], n, classes);
    const T* z = logits + n * classes;
    T* d = dlogits + n * classes;
    T m = z[0];
    for (int64_t j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
    T sum = T(0);
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(z[j] - m);
    const T label_logit = z[labels[n]];
    total += std::log(sum) - (label_logit - m);
    for (int64_t j = 0; j < classes; ++j)
      d[j] = (std::exp(z[j] - m) / sum - (j == labels[n] ? T(1) : T(0))) / normaliser;
  }
  return total / normaliser;
}

// logits: (N, classes)  labels: (N). How many rows have their largest logit at the label
// (ties: the first largest, like argmax everywhere).
template <class T>
int64_t accuracy_count(const T* logits, const int32_t* labels, int64_t N, int64_t classes) {
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (logits[n * classes + j] > logits[n * classes + best]) best = j;
    correct += best == labels[n] ? 1 : 0;
  }
  return correct;
}

}  // namespace ref
}  // namespace brigade

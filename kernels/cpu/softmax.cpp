// See softmax.h.
#include "kernels/cpu/softmax.h"

#include <cmath>

#include "kernels/reference/softmax.h"

namespace brigade::cpu {

void softmax_forward(const float* x, float* y, int64_t N, int64_t classes) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * classes;
    float* yr = y + n * classes;
    float m = xr[0];
    for (int64_t j = 1; j < classes; ++j) m = xr[j] > m ? xr[j] : m;
    float sum = 0.0f;
    for (int64_t j = 0; j < classes; ++j) {
      yr[j] = std::exp(xr[j] - m);
      sum += yr[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < classes; ++j) yr[j] *= inv;
  }
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t N, int64_t classes) {
  for (int64_t n = 0; n < N; ++n) {
    const float* yr = y + n * classes;
    const float* dyr = dy + n * classes;
    float dot = 0.0f;
    for (int64_t j = 0; j < classes; ++j) dot += dyr[j] * yr[j];
    for (int64_t j = 0; j < classes; ++j) dx[n * classes + j] = yr[j] * (dyr[j] - dot);
  }
}

float softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t N,
                            int64_t classes, float normaliser) {
  double total = 0.0;
  const float inv_norm = 1.0f / normaliser;
  for (int64_t n = 0; n < N; ++n) {
    check_label(labels[n], n, classes);
    const float* z = logits + n * classes;
    float* d = dlogits + n * classes;
    float m = z[0];
    for (int64_t j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
    const float label_shifted = z[labels[n]] - m;  // read before d (may alias z) is written
    float sum = 0.0f;
    for (int64_t j = 0; j < classes; ++j) {
      d[j] = std::exp(z[j] - m);
      sum += d[j];
    }
    total += std::log(static_cast<double>(sum)) - label_shifted;
    const float scale = inv_norm / sum;
    for (int64_t j = 0; j < classes; ++j) d[j] *= scale;
    d[labels[n]] -= inv_norm;
  }
  return static_cast<float>(total / normaliser);
}

int64_t accuracy_count(const float* logits, const int32_t* labels, int64_t N, int64_t classes) {
  return ref::accuracy_count(logits, labels, N, classes);
}

}  // namespace brigade::cpu

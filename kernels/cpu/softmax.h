// Softmax, fused softmax + cross-entropy and the accuracy count, the fast CPU path. The rows
// here are few and short (a batch of 10-class logits), so these run on the calling thread:
// waking the pool would cost more than the work. Same contracts as kernels/reference/softmax.h.
#pragma once

#include <cstdint>

namespace brigade::cpu {

// x, y: (N, classes); y may alias x
void softmax_forward(const float* x, float* y, int64_t N, int64_t classes);

// y, dy, dx: (N, classes)
void softmax_backward(const float* y, const float* dy, float* dx, int64_t N, int64_t classes);

// logits, dlogits: (N, classes)  labels: (N). Returns sum_n loss_n / normaliser (summed in
// double); dlogits = (softmax - onehot) / normaliser. Throws on a label outside [0, classes).
float softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits, int64_t N,
                            int64_t classes, float normaliser);

// logits: (N, classes)  labels: (N); rows whose first largest logit is at the label.
int64_t accuracy_count(const float* logits, const int32_t* labels, int64_t N, int64_t classes);

}  // namespace brigade::cpu

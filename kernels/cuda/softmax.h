// Softmax, fused softmax + cross-entropy and the accuracy count (softmax.cu): the contracts
// of kernels/reference/softmax.h, one warp per row. Two compilations: brigade::cuda (nvcc)
// and brigade::emu (the emulator); launches are asynchronous.
//
// A kernel cannot throw, so softmax_cross_entropy reports a label outside [0, classes) in
// its result instead: the caller copies the CrossEntropyResult back (it needs the loss
// anyway) and calls check_cross_entropy_result, which throws what the reference throws.
// A bad row also gets a NaN loss and NaN gradients, so an unchecked result cannot look fine.
#pragma once

#include <cstdint>

#include "kernels/labels.h"

namespace brigade {
class Stream;

// What softmax_cross_entropy leaves in device memory (one struct).
struct CrossEntropyResult {
  float loss;         // sum over rows of the row losses / normaliser
  int32_t bad_row;    // the first row whose label is outside [0, classes), or -1
  int32_t bad_label;  // that row's label (meaningless when bad_row is -1)
};

// Throws std::out_of_range naming the row and the label, as the reference does.
inline void check_cross_entropy_result(const CrossEntropyResult& r, int64_t classes) {
  if (r.bad_row >= 0) check_label(r.bad_label, r.bad_row, classes);
}
}  // namespace brigade

#define BRIGADE_CUDA_SOFTMAX_LAUNCHERS                                                       \
  /* x, y: (N, classes); y may alias x */                                                    \
  void softmax_forward(const float* x, float* y, int64_t N, int64_t classes,                 \
                       const Stream& stream);                                                \
  /* y, dy, dx: (N, classes): dx = y ⊙ (dy - <dy, y>) row by row */                           \
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t N,               \
                        int64_t classes, const Stream& stream);                              \
  /* Floats of workspace softmax_cross_entropy needs: one loss per row. */                   \
  int64_t softmax_cross_entropy_workspace_floats(int64_t N);                                 \
  /* logits, dlogits: (N, classes)  labels: (N)  workspace: (N)  result: (1), device */      \
  /* memory. dlogits = (softmax - onehot) / normaliser (may alias logits); result->loss = */  \
  /* sum of row losses / normaliser; a bad label is reported in *result (see above). */     \
  void softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits,     \
                             int64_t N, int64_t classes, float normaliser, float* workspace, \
                             CrossEntropyResult* result, const Stream& stream);              \
  /* logits: (N, classes)  labels: (N)  correct: (1), overwritten with the number of rows */ \
  /* whose first largest logit is at the label. */                                           \
  void accuracy_count(const float* logits, const int32_t* labels, int64_t N, int64_t classes, \
                      unsigned long long* correct, const Stream& stream);

namespace brigade::emu {
BRIGADE_CUDA_SOFTMAX_LAUNCHERS
}  // namespace brigade::emu
#if defined(BRIGADE_HAVE_CUDA)
namespace brigade::cuda {
BRIGADE_CUDA_SOFTMAX_LAUNCHERS
}  // namespace brigade::cuda
#endif
#undef BRIGADE_CUDA_SOFTMAX_LAUNCHERS

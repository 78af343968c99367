// What the fused softmax + cross-entropy kernel (softmax.cu) leaves in device memory.
//
// A kernel cannot throw, so a label outside [0, classes) is reported here instead: the
// caller copies the result back (it needs the loss anyway) and calls
// check_cross_entropy_result, which throws what the reference throws.
#pragma once

#include <cstdint>

#include "kernels/labels.h"

namespace brigade {

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

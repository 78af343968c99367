// What the host learns of one micro-batch of a training step (pipeline/runtime/step_tally.h):
// its loss, its correct count and its labels' verdict, written on the last stage's device by
// ops::tally_cross_entropy into row `slot` of the step's tally, and copied to the host once per
// step with every other row. Plain data, the same bytes on the host and on a GPU.
#pragma once

#include <cstdint>

namespace brigade {

struct MicroBatchTally {
  float loss;         // the micro-batch's share of the mini-batch's mean loss
  int32_t correct;    // its samples whose first largest logit is the label
  int32_t bad_row;    // a CUDA loss: the first row whose label is outside the classes, or -1
  int32_t bad_label;  // that row's label (meaningless when bad_row is -1)
};

// Floats per row of a tally tensor: (micro-batches, kTallyFloats).
constexpr int64_t kTallyFloats = sizeof(MicroBatchTally) / sizeof(float);
static_assert(sizeof(MicroBatchTally) == 4 * sizeof(float));

}  // namespace brigade

// A training step's verdict on a GPU (pipeline/runtime/step_verdict.h): one int32 word per
// device, kStepOk (0: a fresh zeroed word) while every check of that device passed, else the
// word of its first failure. Check kernels (kernels/cuda/step_verdict.cu) write it with
// atomicMax, the optimizers' multi-tensor kernels read every device's word and update nothing
// when one is not kStepOk, and the host reads the words once per step. Plain data, the same on
// the host and a GPU.
//
// A failure's code orders failures as the host reports them: the smallest stage first (a
// non-finite value spreads only downstream within its micro-batch, so the smallest stage's
// is where it appeared), then the micro-batch, then the check in the order a forward makes
// them. The word is INT32_MAX - code, so that the largest word is the first failure:
//
//   code = (stage · 2^16 + micro-batch) · 4 + check        stage < 2^13, micro-batch < 2^16
#pragma once

#include <cstdint>

namespace brigade {

constexpr int32_t kStepOk = 0;

// The checks of one forward (F), in the order the runtime makes them.
enum class StepCheck : int32_t {
  output_finite = 0,  // the stage's output (RuntimeOptions::check_finite)
  labels = 1,         // the loss's labels (the last stage, always)
  loss_finite = 2,    // the loss (check_finite, the last stage)
};

constexpr int kStepCheckStages = 1 << 13, kStepCheckMicroBatches = 1 << 16;

struct StepCheckFailure {
  int stage;
  int microbatch;
  StepCheck check;
};

// The word of `check` of stage `stage`'s forward of micro-batch `microbatch` (each in range,
// the caller checks): positive, larger for an earlier failure.
constexpr int32_t step_check_word(int stage, int microbatch, StepCheck check) {
  return INT32_MAX - ((stage * kStepCheckMicroBatches + microbatch) * 4 + static_cast<int32_t>(check));
}

// The failure a word (not kStepOk) names.
constexpr StepCheckFailure step_check_failure(int32_t word) {
  const int32_t code = INT32_MAX - word;
  return {code / 4 / kStepCheckMicroBatches, code / 4 % kStepCheckMicroBatches,
          static_cast<StepCheck>(code % 4)};
}

static_assert(step_check_word(0, 0, StepCheck::output_finite) == INT32_MAX);
static_assert(step_check_word(kStepCheckStages - 1, kStepCheckMicroBatches - 1,
                              StepCheck::loss_finite) > kStepOk);
static_assert(step_check_failure(step_check_word(5, 7, StepCheck::labels)).microbatch == 7);

}  // namespace brigade

// Divergence: what brigade-train does about NaN and Inf.
//
//   the loss        every step's loss is read on the host anyway (runners.h); the first one
//                   that is NaN or Inf ends the run with one error naming the step, exit 1:
//                     step 4: the loss is nan: training diverged (try a smaller --lr)
//                   An evaluation's test loss likewise (the parameters went bad in the last
//                   step, or a NaN weight was hidden from the training loss).
//   --check-finite  the runtime checks every stage's output and the loss as they are made
//                   (pipeline::RuntimeOptions::check_finite, a task on the stream, no host
//                   wait); its error names the stage and action where the value appeared,
//                   and the parameters stay those before the step.
//   files           a checkpoint or --save that would hold a NaN or an Inf is refused before
//                   anything is written (the previous file stays), and --init-from and
//                   --resume refuse a file that holds one. A finite loss does not prove finite
//                   parameters: the update after it may overflow, and a ReLU or a max-pool
//                   passes 0 or another value where a NaN weight made a NaN.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "layers/optimizers.h"
#include "tools/train/runners.h"

namespace brigade::train {

// "nan", "inf", "-inf", or the number ("%g").
std::string format_value(double v);

// "conv2d_1.weight (4, 1, 3, 3) holds nan at element 5": the first value of `values` (the
// row-major elements of tensor `name`, of shape `dims`) that is NaN or Inf; empty if none.
std::string first_non_finite(std::span<const float> values, const std::string& name,
                             const std::vector<int64_t>& dims);

// The same over whole tensors, in order: waits for each (a blocking copy to the host).
std::string first_non_finite(const std::vector<layers::NamedTensor>& tensors);

// The parameters as named tensors, for the above.
std::vector<layers::NamedTensor> named(const std::vector<layers::Parameter*>& params);

// --init-from: loads the parameters (layers/param_file.h), then throws naming the file and
// the tensor when one holds a NaN or an Inf (the run then ends: nothing is trained on them).
// Returns the file's dtype, F32 or BF16.
safetensors::Dtype load_if_finite(const std::vector<layers::Parameter*>& params,
                                  const std::string& path);

// --save: writes the parameters (layers/param_file.h) as `dtype` (F32 or BF16) after `step`
// steps, or, when one holds a NaN or an Inf, throws naming it and writes nothing (a previous
// file stays).
void save_if_finite(const std::vector<layers::Parameter*>& params, const std::string& path,
                    int64_t step, safetensors::Dtype dtype = safetensors::Dtype::F32);

// "step 4: <what>: training diverged (try a smaller --lr)"
std::string diverged(int64_t step, const std::string& what);

// Runs `step` (a runner's run or flush). A NaN or an Inf found by --check-finite in the step
// numbered n from 0 becomes "step <n + 1>: <the runtime's message>: training diverged (...)";
// any other error passes through as it is.
std::optional<pipeline::StepResult> naming_divergence(
    const std::function<std::optional<pipeline::StepResult>()>& step);

}  // namespace brigade::train

// Profiling: what each layer of a model costs when it runs, for a cut by measured time
// (partition.h's balance() over these costs, `brigade-train --balance time`). Kept apart from
// the partitioner, which only does arithmetic on costs: this runs the model.
#pragma once
#include <vector>

#include "engine/tensor.h"
#include "layers/sequential.h"

namespace brigade::pipeline {

// Milliseconds of each layer's forward + fused backward on a batch `x` (N, ...) on the
// layer's device, median of `repeats` runs. Synchronises after each layer: a profiler, not
// part of a training step. Leaves the gradients zero.
std::vector<double> profile_layer_times(layers::Sequential& model, const Tensor& x,
                                        int repeats = 3);

}  // namespace brigade::pipeline

// Profiling: what each layer of a model costs when it runs, for a cut by measured time and for
// devices of different speeds (plan.h). Kept apart from the partitioner, which only does
// arithmetic on costs: this runs the model.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "layers/model/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/partition.h"

namespace brigade::pipeline {

// Milliseconds of each layer's forward + fused backward on a batch `x` (N, ...) on the
// layer's device, median of `repeats` runs. Synchronises after each layer: a profiler, not
// part of a training step. Leaves the gradients zero.
std::vector<double> profile_layer_times(layers::Sequential& model, const Tensor& x,
                                        int repeats = 3);

// Each layer's forward + backward in ms on each device ([device][layer]): the whole model,
// built from `seed`, on `probe` (rows, ...) row-major, on the device (a copy, thrown away
// after; a CPU device's on a twin with its threads and no memory limit, so that its
// --device-memory need not hold the whole model). Devices of one kind and thread count
// (`threads`: [device], empty: one kind each) share the first one's profile. A GPU too small
// for the whole model: OutOfMemoryError saying that the profile asked for it.
DeviceCosts profile_devices(const model::ModelSpec& spec, const std::vector<Device>& devices,
                            const std::vector<int>& threads, const std::vector<float>& probe,
                            const Shape& shape, uint64_t seed);

}  // namespace brigade::pipeline

// What a step of a plan holds on each device (pipeline/runtime/step_memory.h), worked by hand
// for a small model, and the in-flight count of 1F1B from its paper: device d of p holds p - d
// micro-batches at its worst instant (and a CPU device one more, issued ahead).
#include <doctest/doctest.h>

#include "kernels/cuda/path.h"
#include "kernels/cuda/stream_workspace.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/step_memory.h"

namespace brigade::pipeline {
namespace {

// input 8 -> dense 4 -> dense 4 -> dense 4 -> dense 3: outputs 4, 4, 4, 3 floats per sample;
// parameters 8*4+4 = 36, 20, 20, 4*3+3 = 15.
model::ModelSpec four_dense() {
  return model::parse_model(
      "input 8\ndense units=4 activation=relu\ndense units=4 activation=relu\n"
      "dense units=4 activation=relu\ndense units=3\n",
      "four_dense.model");
}

TEST_CASE("step memory: activations and parameters of a layer range, by hand") {
  const model::ModelSpec spec = four_dense();
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  // The input, every output, and the largest output once more (its gradient), 4 bytes each.
  CHECK(activation_bytes_per_sample(shapes, 0, 4) == 4 * (8 + 4 + 4 + 4 + 3 + 4));
  CHECK(activation_bytes_per_sample(shapes, 3, 4) == 4 * (4 + 3 + 3));
  CHECK(activation_bytes_per_sample(shapes, 2, 2) == 0);
  // Value and gradient, plus Adam's two moments.
  CHECK(parameter_bytes(shapes, 0, 4, 2) == 4 * (36 + 20 + 20 + 15) * 4);
  CHECK(parameter_bytes(shapes, 0, 3, 0) == 4 * (36 + 20 + 20) * 2);
}

TEST_CASE("step memory: each device's load under 1F1B on two devices") {
  const model::ModelSpec spec = four_dense();
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const Plan plan = make_plan(spec, {.devices = {Device::cpu(0), Device::cpu(1)},
                                     .balance = Balance::flops, .schedule = "1f1b",
                                     .microbatches = 4});
  REQUIRE(plan.cut.stages.size() == 2);
  const size_t cut = plan.cut.stages[0].end;
  const int64_t step_rows = 8;  // 4 micro-batches of 2 rows
  const std::vector<DeviceLoad> loads = step_loads(spec, plan, step_rows, 1, /*seed=*/1);
  REQUIRE(loads.size() == 2);
  CHECK(loads[0].device == Device::cpu(0));
  CHECK(loads[1].device == Device::cpu(1));
  // SGD with momentum: value, gradient, buffer.
  CHECK(loads[0].parameter_bytes == parameter_bytes(shapes, 0, cut, 1));
  CHECK(loads[1].parameter_bytes == parameter_bytes(shapes, cut, 4, 1));
  CHECK(loads[0].parameter_bytes + loads[1].parameter_bytes == 4 * (36 + 20 + 20 + 15) * 3);
  // Two mini-batches staged: images (8 floats a sample) on the first device, labels on the last.
  CHECK(loads[0].staged_bytes == 2 * 4 * 8 * 8);
  CHECK(loads[1].staged_bytes == 2 * 4 * 8);
  // Each stage's micro-batch of 2 rows weighs what the probe measures, at least the analytic
  // bytes; 1F1B's device 0 holds 2 micro-batches in flight and device 1 one, and each CPU
  // device one more, the action its host thread issues ahead.
  const std::vector<uint64_t> bytes = stage_bytes(spec, plan, 2, /*seed=*/1);
  REQUIRE(bytes.size() == 2);
  CHECK(bytes[0] >= 2 * activation_bytes_per_sample(shapes, 0, cut));
  CHECK(bytes[1] >= 2 * activation_bytes_per_sample(shapes, cut, 4));
  CHECK(loads[0].activation_bytes == (2 + 1) * bytes[0]);
  CHECK(loads[1].activation_bytes == (1 + 1) * bytes[1]);
  // The probe holds every tensor of the step at once: the same bytes in every run.
  CHECK(stage_bytes(spec, plan, 2, /*seed=*/1) == bytes);
}

// The hand-written convolution lowers every sample's columns at once up to its 256 MiB budget,
// then as many samples as fit it, and always at least one.
TEST_CASE("step memory: a hand-written convolution's im2col columns, by hand") {
  CHECK(cuda::conv_lowering_floats(144, 4) == 4 * 144);
  CHECK(cuda::conv_lowering_floats(144, 0) == 144);
  CHECK(cuda::conv_lowering_floats(int64_t{1} << 24, 16) == int64_t{1} << 26);  // 4 of 16 fit
  CHECK(cuda::conv_lowering_floats(int64_t{3} << 24, 16) == int64_t{3} << 24);  // 1 (192 MiB)
  CHECK(cuda::conv_lowering_floats(int64_t{1} << 27, 16) == int64_t{1} << 27);  // over: still 1
}

// On GPUs' hand-written path each stream takes its stage's largest convolution lowering for a
// micro-batch beside its activations; on the vendor path (cuDNN) and on CPU devices (whose
// probe measures it) the field stays 0.
TEST_CASE("step memory: a GPU stage's largest im2col columns on the hand-written path") {
  const model::ModelSpec spec = model::parse_model(
      "input 6x6x1\n"
      "device 0\n"
      "conv2d filters=2 kernel=3x3 activation=relu\n"  // 1x6x6 -> 2x4x4: 1·3·3 x 4·4 = 144
      "device 1\n"
      "conv2d filters=3 kernel=3x3 activation=relu\n"  // 2x4x4 -> 3x2x2: 2·3·3 x 2·2 = 72
      "conv2d filters=2 kernel=1x1\n"                  // 3x2x2 -> 2x2x2: 3·1·1 x 2·2 = 12
      "flatten\ndense units=3 activation=softmax\n",
      "three_convs.model");
  const auto loads_on = [&](std::vector<Device> devices, CudaPath path) {
    struct Restore {  // the process's path as it was, however this returns
      CudaPath before = cuda_path();
      ~Restore() { set_cuda_path(before); }
    } restore;
    set_cuda_path(path);
    const Plan plan = make_plan(spec, {.devices = std::move(devices), .microbatches = 2});
    REQUIRE(plan.cut.stages.size() == 2);
    // 2 micro-batches of a 7-row step: the larger has 4 rows.
    return step_loads(spec, plan, 7, 0, std::vector<uint64_t>{0, 0});
  };
  const auto lowering = [](const std::vector<DeviceLoad>& loads) {
    std::vector<uint64_t> bytes;
    for (const DeviceLoad& l : loads) bytes.push_back(l.lowering_bytes);
    return bytes;
  };
  const std::vector<DeviceLoad> gpus =
      loads_on({Device::cuda(0), Device::cuda(1)}, CudaPath::handwritten);
  CHECK(lowering(gpus) == std::vector<uint64_t>{4 * 144 * 4, 4 * 72 * 4});
  CHECK(gpus[0].bytes() == gpus[0].activation_bytes + gpus[0].parameter_bytes +
                               gpus[0].staged_bytes + gpus[0].workspace_bytes + 4 * 144 * 4);
  CHECK(lowering(loads_on({Device::cuda(0), Device::cuda(1)}, CudaPath::vendor)) ==
        std::vector<uint64_t>{0, 0});
  CHECK(lowering(loads_on({Device::cpu(0), Device::cpu(1)}, CudaPath::handwritten)) ==
        std::vector<uint64_t>{0, 0});
}

}  // namespace
}  // namespace brigade::pipeline

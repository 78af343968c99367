// What a step of a plan holds on each device (pipeline/runtime/step_memory.h), worked by hand
// for a small model, and the in-flight count of 1F1B from its paper: device d of p holds p - d
// micro-batches at its worst instant.
#include <doctest/doctest.h>

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
  // One scale (the probe's, at least 1) for both stages: device 0 holds two micro-batches of
  // 2 rows of its stage, device 1 one of its own, each at least the analytic bytes.
  const auto analytic = [&](size_t begin, size_t end) {
    return 2 * activation_bytes_per_sample(shapes, begin, end);  // one micro-batch
  };
  CHECK(loads[0].activation_bytes >= 2 * analytic(0, cut));
  CHECK(loads[1].activation_bytes >= analytic(cut, 4));
  const double held = static_cast<double>(loads[0].activation_bytes) /
                      static_cast<double>(loads[1].activation_bytes);
  const double want = 2.0 * static_cast<double>(analytic(0, cut)) /
                      static_cast<double>(analytic(cut, 4));
  CHECK(held == doctest::Approx(want).epsilon(0.03));  // bytes are rounded down per sample
}

}  // namespace
}  // namespace brigade::pipeline

// A step's verdict on the devices (pipeline/runtime/step_verdict.h): on GPUs the checks write
// it there and the optimizers obey it, and the host learns it at the step's end. What a user
// sees must be what the host path shows: the failure of the same device, stage, action and
// micro-batch as a run on CPU devices (whose checks are tasks that throw), no parameter
// changed, and, after a failed step, an optimizer whose counts (Adam's bias correction) are
// those of a run that never had it. Run on the devices of BRIGADE_TEST_DEVICES (CI: 1, 2 and
// 4 emulated GPUs, and every stage on one), each test beside CPU devices.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages of the test model on `devices`, 1F1B over 4 micro-batches.
struct ThreeStagesOn {
  ThreeStagesOn(const std::vector<Device>& devices, const OptimizerFactory& optimizer,
              RuntimeOptions options)
      : partition(at_cuts(8, {2, 6})),
        model(layers::Sequential::placed(
            test::small_spec(), layer_devices(partition, devices, Placement::looped),
            test::kModelSeed)),
        runtime(*model, devices, partition, make_schedule("1f1b", 3, 4), optimizer,
                test::runtime_options(options)) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  Runtime runtime;
};

std::vector<Device> cpu_devices(int first) {
  return {Device::cpu(first), Device::cpu(first + 1), Device::cpu(first + 2)};
}

// Element 0 of stage 1's first weight = NaN, through the host (the runtime is idle).
void poison_stage_1(ThreeStagesOn& t) {
  const StageRange r = t.partition.stages[1];
  for (size_t i = r.begin; i < r.end; ++i) {
    const auto params = t.model->parameters(i, i + 1);
    if (params.empty()) continue;
    const Tensor& w = params[0]->value;
    std::vector<float> host = w.to_vector();
    host[0] = std::numeric_limits<float>::quiet_NaN();
    const Stream s = Stream::default_for(w.device());
    copy_async(w, Tensor::from_vector(host, w.shape(), s), s);
    s.synchronize();
    return;
  }
  FAIL("stage 1 has no parameter");
}

struct Failure {
  int device = -1, stage = -1;
  Action action{};
  std::string what;
};

// `got` failed where `expected` (the same step on CPU devices) did: device, stage, action.
void check_same_place(const Failure& got, const Failure& expected) {
  CHECK(got.device == expected.device);
  CHECK(got.stage == expected.stage);
  CHECK(got.action == expected.action);
}

// The failure of one step of `t` on `batch`, once its parameters are checked unchanged.
Failure failed_step(ThreeStagesOn& t, const HostBatch& batch, uint32_t step) {
  const auto before = test::params_of(*t.model);
  Failure f;
  try {
    t.runtime.step(batch, step);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    test::check_same_bits(*t.model, before);
    REQUIRE(e.action().has_value());
    f = {e.device(), e.stage(), *e.action(), e.what()};
  }
  return f;
}

TEST_CASE("a NaN in stage 1 of 3: the same failure as on CPU devices, no parameter changed") {
  testing::Deadline deadline("a NaN in stage 1, beside CPU devices");
  // Every check on: stage 1's output, then stage 2's and the loss carry the NaN too, on
  // another device (or the same GPU): the verdict must name stage 1's, the first.
  const RuntimeOptions options{.seed = test::kDropoutSeed, .check_finite = true};
  const HostBatch batch = test::random_batch(8, 9);
  ThreeStagesOn cpu(cpu_devices(110), test::sgd, options);
  ThreeStagesOn here(test::test_devices(3, 113), test::sgd, options);
  poison_stage_1(cpu);
  poison_stage_1(here);
  const Failure expected = failed_step(cpu, batch, 0);
  const Failure got = failed_step(here, batch, 0);
  CHECK(expected.action == Action{1, Op::F, 0});
  check_same_place(got, expected);
  CAPTURE(got.what);
  CHECK(got.what.find("pipeline step 0 (schedule 1f1b) failed on " +
                      here.runtime.devices()[1].str() + " (device 1), stage 1, action 1F0 "
                      "(micro-batch 0): ") != std::string::npos);
  CHECK(got.what.find("non-finite value") != std::string::npos);
  CHECK(got.what.find("the output of stage 1") != std::string::npos);
}

TEST_CASE("a bad label: the last stage's failure, as on CPU devices, no parameter changed") {
  testing::Deadline deadline("a bad label, beside CPU devices");
  const RuntimeOptions options{.seed = test::kDropoutSeed};
  HostBatch batch = test::random_batch(8, 9);
  batch.labels[5] = 7;  // 3 classes; 4 micro-batches of 2: micro-batch 2, its row 1
  ThreeStagesOn cpu(cpu_devices(116), test::sgd, options);
  ThreeStagesOn here(test::test_devices(3, 119), test::sgd, options);
  const Failure expected = failed_step(cpu, batch, 0);
  const Failure got = failed_step(here, batch, 0);
  CHECK(expected.action == Action{2, Op::F, 2});
  check_same_place(got, expected);
  CAPTURE(got.what);
  CHECK(got.what.find("label 7 of row 1 is outside [0, 3)") != std::string::npos);
}

TEST_CASE("Adam after a failed step takes the step a run without it takes, to the bit") {
  testing::Deadline deadline("Adam's counts after a failed step");
  const OptimizerFactory adam = [](std::vector<layers::Parameter*> params) {
    return std::make_unique<layers::Adam>(std::move(params), AdamParams{.lr = 0.01});
  };
  const RuntimeOptions options{.seed = test::kDropoutSeed};
  const std::vector<HostBatch> batches = test::random_batches(2, 8, 21);
  HostBatch bad = batches[1];
  bad.labels[0] = 7;  // 3 classes: the step fails at its first loss
  ThreeStagesOn failed(test::test_devices(3, 122), adam, options);
  ThreeStagesOn clean(test::test_devices(3, 125), adam, options);
  failed.runtime.step(batches[0], 0);
  failed_step(failed, bad, 1);
  const StepResult after = failed.runtime.step(batches[1], 2);
  clean.runtime.step(batches[0], 0);
  const StepResult expected = clean.runtime.step(batches[1], 2);
  CHECK(after.loss == expected.loss);
  // Adam's bias correction counts 2 steps on both: every parameter has the same bits.
  test::check_same_bits(*failed.model, test::params_of(*clean.model));
}

}  // namespace
}  // namespace brigade::pipeline

// Failures without hangs: an error in the first, middle or last of 3 stages — out of memory on
// a device with a capacity, a NaN caught by the check after each forward, a bad shape, a bad
// label — stops every stage; step() throws the first error naming device, stage, action and
// micro-batch; and the runtime then runs the next step normally (it stays usable).
#include <doctest/doctest.h>

#include <limits>

#include "engine/allocator.h"
#include "pipeline/generators/generators.h"
#include "tests/pipeline/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages on cpu:first .. cpu:first+2 (each test its own devices: allocators are per device).
struct ThreeStages {
  explicit ThreeStages(int first, RuntimeOptions options = {.seed = test::kDropoutSeed})
      : partition(at_cuts(8, {2, 6})),
        model(test::placed_model(partition, 3, first)),
        runtime(*model, partition, make_schedule("1f1b", 3, 4), test::sgd, options) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  Runtime runtime;
};

const HostBatch& batch() {
  static const HostBatch b = test::random_batch(8, 9);
  return b;
}

// The first float of stage s's first parameter (a weight), written by the host while idle.
float& first_weight(ThreeStages& t, int stage) {
  const StageRange r = t.partition.stages[static_cast<size_t>(stage)];
  for (size_t i = r.begin; i < r.end; ++i) {
    auto params = t.model->parameters(i, i + 1);
    if (!params.empty()) return params[0]->value.data<float>()[0];
  }
  FAIL("stage " << stage << " has no parameter");
  static float none = 0;
  return none;
}

TEST_CASE("a NaN in any stage stops the step at that stage's first forward") {
  for (int stage = 0; stage < 3; ++stage) {
    CAPTURE(stage);
    testing::Deadline deadline("NaN in stage " + std::to_string(stage));
    ThreeStages t(20 + 3 * stage, {.seed = test::kDropoutSeed, .check_finite = true});
    float& w = first_weight(t, stage);
    const float saved = w;
    w = std::numeric_limits<float>::quiet_NaN();
    try {
      t.runtime.step(batch(), 0);
      FAIL("the step did not fail");
    } catch (const PipelineError& e) {
      CHECK(e.device() == stage);
      CHECK(e.stage() == stage);
      REQUIRE(e.action().has_value());
      CHECK(*e.action() == Action{stage, Op::F, 0});
      const std::string what = e.what();
      CHECK(what.find("stage " + std::to_string(stage) + ", action " + std::to_string(stage) +
                      "F0 (micro-batch 0)") != std::string::npos);
      CHECK(what.find("non-finite") != std::string::npos);
    }
    // Usable afterwards: with the weight restored, the next step runs and gives a finite loss.
    w = saved;
    const StepResult r = t.runtime.step(batch(), 0);
    CHECK(std::isfinite(r.loss));
  }
}

TEST_CASE("out of memory on any stage's device stops every stage") {
  for (int stage = 0; stage < 3; ++stage) {
    CAPTURE(stage);
    testing::Deadline deadline("out of memory in stage " + std::to_string(stage));
    const int first = 30 + 3 * stage;
    ThreeStages t(first);
    const int index = first + stage;
    // Room for what exists (parameters, gradients, momentum) and nothing more.
    const uint64_t used = Allocator::of(Device::cpu(index)).stats().reserved;
    configure_cpu_device(index, {.threads = 1, .capacity_bytes = used + 1});
    try {
      t.runtime.step(batch(), 0);
      FAIL("the step did not fail");
    } catch (const PipelineError& e) {
      const std::string what = e.what();
      CHECK(what.find("out of memory") != std::string::npos);
      CHECK(what.find("cpu:" + std::to_string(index)) != std::string::npos);
      // The first allocation on that device: staging the micro-batches (stage 0's inputs, the
      // last stage's labels), its stage's first forward, or the buffer the previous stage's
      // send copies the activation into.
      if (e.action()) {
        CHECK(e.action()->microbatch == 0);
        CHECK(e.action()->op == Op::F);
        CHECK((e.action()->stage == stage || e.action()->stage == stage - 1));
      } else {
        // Before any action: staging the inputs (stage 0) or the labels (the last stage).
        CHECK(e.stage() == stage);
        CHECK(stage != 1);
        CHECK(what.find("staging micro-batch 0") != std::string::npos);
      }
    }
    configure_cpu_device(index, {.threads = 1, .capacity_bytes = 0});
    CHECK(std::isfinite(t.runtime.step(batch(), 0).loss));
  }
}

TEST_CASE("a bad input shape fails the first stage, a bad label the last") {
  testing::Deadline deadline("bad shape and bad label");
  ThreeStages t(40);
  HostBatch wrong = test::random_batch(8, 9);
  wrong.shape = Shape({8, 1, 4, 16});  // the same number of values, the wrong image
  try {
    t.runtime.step(wrong, 0);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    CHECK(e.stage() == 0);
    CHECK(*e.action() == Action{0, Op::F, 0});
  }
  HostBatch bad_label = batch();
  bad_label.labels[0] = 7;  // 3 classes
  try {
    t.runtime.step(bad_label, 0);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    CHECK(e.stage() == 2);
    CHECK(*e.action() == Action{2, Op::F, 0});
  }
  CHECK(std::isfinite(t.runtime.step(batch(), 0).loss));
}

}  // namespace
}  // namespace brigade::pipeline

// Steps submitted back to back (Runtime::submit, runtime.h): on GPUs whose checks give their
// verdict there, a step's result is read by the next submit() or by flush(), one step late.
// What a user sees must not change: the same losses, bit for bit, as steps each waited for; a
// failure reported with the same device, stage, action and micro-batch as a run on CPU
// devices, by the next call, with no parameter changed by the failed step or by the step
// enqueued behind it; a timeline measured as a waited-for step's. Elsewhere submit() returns
// the step's own result, and the same checks hold. Run on the devices of BRIGADE_TEST_DEVICES
// (CI: 1, 2 and 4 emulated GPUs, and every stage on one), beside CPU devices.
#include <doctest/doctest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages of the test model on `devices`, 1F1B over 4 micro-batches, every check on.
struct CheckedPipeline {
  CheckedPipeline(const std::vector<Device>& devices, const OptimizerFactory& optimizer)
      : partition(at_cuts(8, {2, 6})),
        model(layers::Sequential::placed(
            test::small_spec(), layer_devices(partition, devices, Placement::looped),
            test::kModelSeed)),
        runtime(*model, devices, partition, make_schedule("1f1b", 3, 4), optimizer,
                test::runtime_options({.seed = test::kDropoutSeed, .check_finite = true})) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  Runtime runtime;
};

const OptimizerFactory adam = [](std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::Adam>(std::move(params), AdamParams{.lr = 0.01});
};

// Pending where the verdict is on the GPUs (every device a GPU), none on CPU devices.
bool left_pending(const std::vector<Device>& devices) { return devices.front().is_cuda(); }

TEST_CASE("submitted steps: the losses and parameters of steps each waited for, to the bit") {
  testing::Deadline deadline("10 submitted steps against 10 waited for");
  const std::vector<HostBatch> batches = test::random_batches(10, 8, 31);
  const std::vector<Device> devices = test::test_devices(3, 130);
  CheckedPipeline waited(devices, test::sgd);
  CheckedPipeline submitted(test::test_devices(3, 133), test::sgd);
  std::vector<StepResult> got;
  for (uint32_t k = 0; k < 10; ++k) {
    std::optional<StepResult> r = submitted.runtime.submit(batches[k], k);
    // The step before's result (none for the first), or this one's where nothing is pending.
    CHECK(r.has_value() == (!left_pending(devices) || k > 0));
    CHECK(submitted.runtime.pending_step().has_value() == left_pending(devices));
    if (r) got.push_back(*r);
  }
  if (std::optional<StepResult> last = submitted.runtime.flush()) got.push_back(*last);
  CHECK_FALSE(submitted.runtime.pending_step().has_value());
  CHECK_FALSE(submitted.runtime.flush().has_value());  // nothing left
  REQUIRE(got.size() == 10);
  for (uint32_t k = 0; k < 10; ++k) {
    const StepResult expected = waited.runtime.step(batches[k], k);
    CAPTURE(k);
    CHECK(got[k].step == k);
    CHECK(got[k].loss == expected.loss);  // bit for bit
    CHECK(got[k].correct == expected.correct);
    CHECK(got[k].sent_bytes == expected.sent_bytes);
    CHECK(got[k].peak_memory.size() == expected.peak_memory.size());
  }
  test::check_same_bits(*submitted.model, test::params_of(*waited.model));
}

TEST_CASE("a NaN in step 2 of submitted steps: its failure, named as on CPU devices; step 3, "
          "behind it, changes nothing either") {
  testing::Deadline deadline("a NaN in a submitted step");
  std::vector<HostBatch> batches = test::random_batches(5, 8, 41);
  batches[2].x[3 * 64 + 5] = std::numeric_limits<float>::quiet_NaN();  // sample 3: micro-batch 1
  const std::vector<Device> devices = test::test_devices(3, 136);
  CheckedPipeline cpu({Device::cpu(139), Device::cpu(140), Device::cpu(141)}, adam);
  CheckedPipeline here(devices, adam);
  cpu.runtime.step(batches[0], 0);
  cpu.runtime.step(batches[1], 1);
  std::string expected;  // the failure on CPU devices, which the GPUs' must name alike
  CAPTURE(expected);      // read when a check fails, so it shows what the CPU devices said
  try {
    cpu.runtime.step(batches[2], 2);
    FAIL("the step on CPU devices did not fail");
  } catch (const PipelineError& e) {
    expected = e.what();
    CHECK(e.action() == Action{0, Op::F, 1});
  }

  here.runtime.submit(batches[0], 0);
  here.runtime.submit(batches[1], 1);
  here.runtime.flush();
  const auto after_step_1 = test::params_of(*here.model);
  std::optional<PipelineError> failure;
  std::optional<uint32_t> thrown_by;  // the step whose submit() (or 5: flush()) threw
  for (uint32_t k = 2; k < 4 && !failure; ++k) try {
      here.runtime.submit(batches[k], k);
    } catch (const PipelineError& e) {
      failure = e;
      thrown_by = k;
    }
  REQUIRE(failure.has_value());
  CHECK(*thrown_by == (left_pending(devices) ? 3u : 2u));  // one call late on the GPUs' verdict
  CHECK(failure->step() == 2);
  CHECK(failure->device() == 0);
  CHECK(failure->stage() == 0);
  CHECK(failure->action() == Action{0, Op::F, 1});
  const std::string what = failure->what();
  CAPTURE(what);
  const std::string place = " (device 0), stage 0, action 0F1 (micro-batch 1): ";
  CHECK(what.find("pipeline step 2 (schedule 1f1b) failed on " + devices[0].str() + place) !=
        std::string::npos);
  CHECK(expected.find("pipeline step 2 (schedule 1f1b) failed on cpu:139" + place) !=
        std::string::npos);
  for (const std::string& text : {what, expected}) {
    CHECK(text.find("non-finite value") != std::string::npos);
    CHECK(text.find("the output of stage 0") != std::string::npos);
  }
  CHECK_FALSE(here.runtime.pending_step().has_value());  // step 3 went with it
  test::check_same_bits(*here.model, after_step_1);

  // Usable again, as if steps 2 and 3 never were: Adam's counts say 2 steps before step 4.
  CheckedPipeline clean(test::test_devices(3, 142), adam);
  clean.runtime.step(batches[0], 0);
  clean.runtime.step(batches[1], 1);
  const StepResult expected_4 = clean.runtime.step(batches[4], 4);
  here.runtime.submit(batches[4], 4);
  std::optional<StepResult> r = here.runtime.flush();
  if (!left_pending(devices)) r = expected_4;  // submit() returned it (not kept: compared above)
  REQUIRE(r.has_value());
  CHECK(r->loss == expected_4.loss);
  test::check_same_bits(*here.model, test::params_of(*clean.model));
}

TEST_CASE("a step that fails on a host thread behind a pending one: the pending step's result "
          "comes with the failure") {
  testing::Deadline deadline("a host failure behind a pending step");
  const std::vector<HostBatch> batches = test::random_batches(2, 8, 61);
  HostBatch wrong = batches[1];
  wrong.shape = Shape({8, 1, 4, 16});  // the same number of values: stage 0's F throws
  const std::vector<Device> devices = test::test_devices(3, 148);
  CheckedPipeline waited(test::test_devices(3, 151), test::sgd);
  CheckedPipeline here(devices, test::sgd);
  const StepResult expected_0 = waited.runtime.step(batches[0], 0);
  const std::optional<StepResult> r_0 = here.runtime.submit(batches[0], 0);
  CHECK(r_0.has_value() == !left_pending(devices));
  try {
    here.runtime.submit(wrong, 1);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    CAPTURE(std::string(e.what()));
    CHECK(e.step() == 1);
    CHECK(e.stage() == 0);
    CHECK(e.action() == Action{0, Op::F, 0});
    // Step 0 was pending: this call finished it, and only this error can give its result.
    // Where submit(0) returned it already, the error holds none.
    REQUIRE((e.completed() != nullptr) == left_pending(devices));
    const StepResult& got = e.completed() ? *e.completed() : *r_0;
    CHECK(got.step == 0);
    CHECK(got.loss == expected_0.loss);  // bit for bit
    CHECK(got.correct == expected_0.correct);
    CHECK(got.sent_bytes == expected_0.sent_bytes);
  }
  CHECK_FALSE(here.runtime.pending_step().has_value());
  test::check_same_bits(*here.model, test::params_of(*waited.model));  // step 0's update kept
  // Usable again: step 1 as in a run that never had the failure.
  const StepResult expected_1 = waited.runtime.step(batches[1], 1);
  CHECK(here.runtime.step(batches[1], 1).loss == expected_1.loss);
  test::check_same_bits(*here.model, test::params_of(*waited.model));
}

TEST_CASE("a step submitted behind a pending one: its timeline has every action in list "
          "order, from 0 on") {
  testing::Deadline deadline("the timeline of a submitted step");
  const std::vector<HostBatch> batches = test::random_batches(3, 8, 51);
  const std::vector<Device> devices = test::test_devices(3, 145);
  CheckedPipeline t(devices, test::sgd);
  const Schedule& schedule = t.runtime.schedule();
  std::vector<StepResult> results;
  for (uint32_t k = 0; k < 3; ++k)
    if (std::optional<StepResult> r = t.runtime.submit(batches[k], k)) results.push_back(*r);
  if (std::optional<StepResult> r = t.runtime.flush()) results.push_back(*r);
  REQUIRE(results.size() == 3);
  for (const StepResult& r : results) {
    CAPTURE(r.step);
    const Timeline& tl = r.timeline;
    test::check_compute_lane(tl, schedule);
    // Behind a pending step, the send and receive lanes too: nothing of the step ran before
    // the step before had ended. (The first step's receive stream is idle at its start, not
    // ordered after its compute stream's origin.)
    if (r.step > 0 || !left_pending(devices))
      for (const TimelineEvent& e : tl.events) {
        CHECK(e.start >= 0);
        CHECK(e.end >= e.start);
      }
    // Two devices' clocks compare on CPU devices (one host clock) — as for a waited-for step.
    if (devices.front().is_cpu())
      for (const Flow& f : tl.flows) CHECK(tl.events[f.to].end >= tl.events[f.from].start);
  }
}

}  // namespace
}  // namespace brigade::pipeline

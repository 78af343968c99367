// Failures without hangs: an error in the first, middle or last of 3 stages — out of memory on
// a device with a capacity, a NaN caught by the check after each forward, a bad shape, a bad
// label — stops every stage; step() throws the first error naming device, stage, action and
// micro-batch; no parameter changes (the update waits for the verdict, on GPUs too); and the
// runtime then runs the next step normally (it stays usable).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "engine/allocator.h"
#include "pipeline/runtime/step_checks.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages on cpu:first .. cpu:first+2 (each test its own devices: allocators are per device).
struct ThreeStages {
  explicit ThreeStages(int first, RuntimeOptions options = {.seed = test::kDropoutSeed})
      : partition(at_cuts(8, {2, 6})),
        model(test::placed_model(partition, 3, first)),
        runtime(*model, test::test_devices(3, first), partition, make_schedule("1f1b", 3, 4),
                test::sgd, test::runtime_options(options)) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  Runtime runtime;
};

const HostBatch& batch() {
  static const HostBatch b = test::random_batch(8, 9);
  return b;
}

// Stage s's first parameter (a weight): where a test writes a NaN.
Tensor first_weight(ThreeStages& t, int stage) {
  const StageRange r = t.partition.stages[static_cast<size_t>(stage)];
  for (size_t i = r.begin; i < r.end; ++i) {
    auto params = t.model->parameters(i, i + 1);
    if (!params.empty()) return params[0]->value;
  }
  FAIL("stage " << stage << " has no parameter");
  return {};
}

// Sets element 0 of `w` to `value` and returns the old one: a blocking round trip through
// the host, so it works on any device (the runtime is idle between steps).
float set_first(const Tensor& w, float value) {
  std::vector<float> host = w.to_vector();
  const float old = host[0];
  host[0] = value;
  const Stream s = Stream::default_for(w.device());
  copy_async(w, Tensor::from_vector(host, w.shape(), s), s);
  s.synchronize();
  return old;
}

// On CPU devices a check fails in a task of its device's stream, and the failure travels along
// the event waits: a device downstream meets it as its own stream's error, which may reach the
// runtime before anything reports it from the device that checked (seen once under load: a
// NaN at 0F1 named at 2B0, the device that met it). The failed check's action is read through
// every stream that passed it on, and names the failure (Runtime::fail).
TEST_CASE("a failed check is named by its action through the streams that passed it on") {
  testing::Deadline deadline("a failed check passed on");
  const Stream checked = Stream::create(Device::cpu(0)), downstream = Stream::create(Device::cpu(1));
  const Action at{0, Op::F, 1};
  checked.enqueue([at] { throw FailedCheck("non-finite value nan", at); });
  Event after_check;
  after_check.record(checked);
  const Stream further = Stream::create(Device::cpu(2));
  downstream.wait(after_check);
  Event after_downstream;
  after_downstream.record(downstream);
  further.wait(after_downstream);
  std::exception_ptr passed_on;
  try {
    further.synchronize();
  } catch (const StreamError&) {
    passed_on = std::current_exception();
  }
  REQUIRE(passed_on);
  CHECK(failed_check_action(passed_on) == at);
  CHECK(failed_check_action(std::make_exception_ptr(FailedCheck("the loss", at))) == at);
  // Any other failure names no check, passed on or not.
  CHECK_FALSE(failed_check_action(std::make_exception_ptr(Error("out of memory"))).has_value());
  const Stream other = Stream::create(Device::cpu(0));
  other.enqueue([] { throw Error("a bad shape"); });
  try {
    other.synchronize();
    FAIL("the task did not fail");
  } catch (const StreamError&) {
    CHECK_FALSE(failed_check_action(std::current_exception()).has_value());
  }
  CHECK_FALSE(failed_check_action(nullptr).has_value());
}

TEST_CASE("a NaN in any stage stops the step at that stage's first forward") {
  // With clipping too: the norm is read on the host after the device threads end, and a
  // stream whose NaN check failed must still be reported as that check, with no update.
  for (const double clip : {0.0, 0.05})
  for (int stage = 0; stage < 3; ++stage) {
    CAPTURE(clip);
    CAPTURE(stage);
    testing::Deadline deadline("NaN in stage " + std::to_string(stage));
    ThreeStages t(20 + 3 * stage,
                  {.seed = test::kDropoutSeed, .check_finite = true, .max_grad_norm = clip});
    const Tensor w = first_weight(t, stage);
    const float saved = set_first(w, std::numeric_limits<float>::quiet_NaN());
    const auto before = test::params_of(*t.model);
    try {
      t.runtime.step(batch(), 0);
      FAIL("the step did not fail");
    } catch (const PipelineError& e) {
      // No optimizer ran: every parameter has its bits from before the step (NaN included).
      test::check_same_bits(*t.model, before);
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
    set_first(w, saved);
    const StepResult r = t.runtime.step(batch(), 0);
    CHECK(std::isfinite(r.loss));
  }
}

TEST_CASE("out of memory on any stage's device stops every stage") {
  if (test::on_cuda()) {  // a capacity is a virtual CPU device's; a GPU's is its memory
    MESSAGE("skipped on CUDA devices: needs CPU devices with a capacity");
    return;
  }
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
  // A CPU loss task throws on a bad label; the CUDA kernel cannot throw: it writes NaN for
  // that sample and records the row, which the runtime's label check (step_checks.h) turns
  // into the same failure for the same action. No NaN check is on: it was, for CUDA, until
  // a reading found that without it a bad label trained on NaN.
  ThreeStages t(40, {.seed = test::kDropoutSeed});
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
  const auto before = test::params_of(*t.model);
  try {
    t.runtime.step(bad_label, 0);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    test::check_same_bits(*t.model, before);
    CHECK(e.stage() == 2);
    CHECK(*e.action() == Action{2, Op::F, 0});
  }
  CHECK(std::isfinite(t.runtime.step(batch(), 0).loss));
}

// The streams a process holds, counted by the engine's list of live streams (one line each).
size_t live_streams() {
  const std::string text = describe_streams();
  if (text == "(no live streams)\n") return 0;
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The bytes in use on each device of `t`, in the order of its devices (a GPU of two stages
// appears twice).
std::vector<uint64_t> in_use(const std::vector<Device>& devices) {
  std::vector<uint64_t> bytes;
  for (const Device& d : devices) bytes.push_back(Allocator::of(d).stats().in_use);
  return bytes;
}

TEST_CASE("a failed step leaves as many live streams, and as much memory in use, as it found") {
  testing::Deadline deadline("streams after failed steps");
  ThreeStages t(50);
  const std::vector<Device> devices = test::test_devices(3, 50);
  CHECK(std::isfinite(t.runtime.step(batch(), 0).loss));
  const size_t before = live_streams();
  const std::vector<uint64_t> memory = in_use(devices);
  HostBatch bad_label = batch();
  bad_label.labels[0] = 7;  // 3 classes: the last stage fails
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK_THROWS_AS(t.runtime.step(bad_label, 0), PipelineError);
    CHECK(live_streams() == before);
  }
  CHECK(std::isfinite(t.runtime.step(batch(), 0).loss));
  CHECK(live_streams() == before);
  // The streams a failed step left behind gave back what they kept (on the vendor path, each
  // compute stream's cuBLAS workspace); the fresh ones have theirs.
  CHECK(in_use(devices) == memory);
}

}  // namespace
}  // namespace brigade::pipeline

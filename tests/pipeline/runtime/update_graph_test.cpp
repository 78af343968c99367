// Each stage's update as a CUDA graph (pipeline/runtime/update_graph.h, RuntimeOptions::
// cuda_graphs): captured at the first step and replayed, it must give the parameters of the
// same steps run with graphs off, to the bit — SGD's first step and Adam's bias correction
// change at every step, and they reach the replayed kernels through device memory only. A
// failed step under a graph changes nothing and names its place; the steps after it are
// those of a run that never had it. Run on the devices of BRIGADE_TEST_DEVICES (CI: 1, 2 and
// 4 emulated GPUs, every stage on one, both CUDA paths); on CPU devices graphs are ignored
// and the same checks hold.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages of the test model on test_devices(3, first), 1F1B over 4 micro-batches.
struct Pipeline {
  Pipeline(int first, const OptimizerFactory& optimizer, bool graphs)
      : partition(at_cuts(8, {2, 6})),
        model(test::placed_model(partition, 3, first)),
        runtime(*model, test::test_devices(3, first), partition, make_schedule("1f1b", 3, 4),
                optimizer, RuntimeOptions{.seed = test::kDropoutSeed, .cuda_graphs = graphs}) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  Runtime runtime;
};

std::unique_ptr<layers::Optimizer> adamw(std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::Adam>(
      std::move(params), AdamParams{.lr = 0.01, .weight_decay = 0.1, .decoupled = true});
}

// The parameters after `steps` steps on random batches, graphs on or off.
std::vector<std::vector<float>> trained(int first, const OptimizerFactory& optimizer,
                                        bool graphs, int steps) {
  Pipeline p(first, optimizer, graphs);
  const std::vector<HostBatch> batches = test::random_batches(steps, 8, 31);
  for (int s = 0; s < steps; ++s)
    p.runtime.step(batches[static_cast<size_t>(s)], static_cast<uint32_t>(s));
  return test::params_of(*p.model);
}

void check_same_bits(const std::vector<std::vector<float>>& got,
                     const std::vector<std::vector<float>>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == expected[i]);  // float ==: the same values; NaN would fail, and must
  }
}

TEST_CASE("update graphs on and off: the same parameters to the bit, SGD with momentum") {
  testing::Deadline deadline("update graphs, SGD");
  check_same_bits(trained(130, test::sgd, true, 4), trained(133, test::sgd, false, 4));
}

TEST_CASE("update graphs on and off: the same parameters to the bit, AdamW") {
  testing::Deadline deadline("update graphs, AdamW");
  check_same_bits(trained(136, adamw, true, 4), trained(139, adamw, false, 4));
}

TEST_CASE("a failed step under update graphs: nothing changed, its place named, then the "
          "steps of a run without it") {
  testing::Deadline deadline("a failed step under update graphs");
  const std::vector<HostBatch> batches = test::random_batches(2, 8, 41);
  HostBatch bad = batches[1];
  bad.labels[5] = 7;  // 3 classes; 4 micro-batches of 2: micro-batch 2, its row 1
  Pipeline failed(142, adamw, true);
  Pipeline clean(145, adamw, true);
  failed.runtime.step(batches[0], 0);  // the graphs are captured here
  const std::vector<std::vector<float>> before = test::params_of(*failed.model);
  try {
    failed.runtime.step(bad, 1);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    CAPTURE(std::string(e.what()));
    CHECK(e.stage() == 2);
    REQUIRE(e.action().has_value());
    CHECK(*e.action() == Action{2, Op::F, 2});
    CHECK(std::string(e.what()).find("label 7 of row 1 is outside [0, 3)") != std::string::npos);
  }
  check_same_bits(test::params_of(*failed.model), before);
  const StepResult after = failed.runtime.step(batches[1], 2);
  clean.runtime.step(batches[0], 0);
  const StepResult expected = clean.runtime.step(batches[1], 2);
  CHECK(after.loss == expected.loss);
  // The failed step's gradients did not leak into the next, and Adam counts 2 steps on both.
  check_same_bits(test::params_of(*failed.model), test::params_of(*clean.model));
}

}  // namespace
}  // namespace brigade::pipeline

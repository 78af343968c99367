// Each stage's update as a CUDA graph (pipeline/runtime/update_graph.h, RuntimeOptions::
// cuda_graphs): captured at the first step and replayed, it must give the parameters of the
// same steps run with graphs off, to the bit — SGD's first step and Adam's bias correction
// change at every step, and they reach the replayed kernels through device memory only. A
// failed step under a graph changes nothing and names its place; the steps after it are
// those of a run that never had it. Run on the devices of BRIGADE_TEST_DEVICES (CI: 1, 2 and
// 4 emulated GPUs, every stage on one, both CUDA paths); on CPU devices graphs are ignored
// and the same checks hold.
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages of the test model on test_devices(3, first), 1F1B over 4 micro-batches. The
// optimizers the runtime makes are kept, as brigade-train keeps them for its checkpoints.
struct Pipeline {
  Pipeline(int first, const OptimizerFactory& optimizer, bool graphs)
      : partition(at_cuts(8, {2, 6})),
        model(test::placed_model(partition, 3, first)),
        runtime(*model, test::test_devices(3, first), partition, make_schedule("1f1b", 3, 4),
                [this, optimizer](std::vector<layers::Parameter*> params) {
                  std::unique_ptr<layers::Optimizer> o = optimizer(std::move(params));
                  optimizers.push_back(o.get());
                  return o;
                },
                RuntimeOptions{.seed = test::kDropoutSeed, .cuda_graphs = graphs}) {}
  Partition partition;
  std::unique_ptr<layers::Sequential> model;
  std::vector<layers::Optimizer*> optimizers;  // one per stage, owned by the runtime
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

// Every tensor a checkpoint holds (tools/train/checkpoint.cpp): the parameters, then each
// optimizer's state; the optimizers' step counts beside them.
struct UgtSnapshot {
  std::vector<std::vector<float>> tensors;
  std::vector<int64_t> steps;
};

std::vector<Tensor> ugt_checkpointed(Pipeline& p) {
  std::vector<Tensor> out;
  for (layers::Parameter* param : p.model->parameters()) out.push_back(param->value);
  for (layers::Optimizer* o : p.optimizers)
    for (const layers::NamedTensor& t : o->state()) out.push_back(t.tensor);
  return out;
}

UgtSnapshot ugt_save(Pipeline& p) {
  UgtSnapshot saved;
  for (const Tensor& t : ugt_checkpointed(p)) saved.tensors.push_back(t.to_vector());
  for (layers::Optimizer* o : p.optimizers) saved.steps.push_back(o->steps());
  return saved;
}

// As a resume loads a checkpoint: into the tensors' own storage, then the step counts.
void ugt_load(Pipeline& p, const UgtSnapshot& saved) {
  const std::vector<Tensor> tensors = ugt_checkpointed(p);
  REQUIRE(tensors.size() == saved.tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Stream& s = tensors[i].stream();
    copy_async(tensors[i], Tensor::from_vector(saved.tensors[i], tensors[i].shape(), s), s);
    s.synchronize();
  }
  for (size_t i = 0; i < p.optimizers.size(); ++i) p.optimizers[i]->set_steps(saved.steps[i]);
}

// Every parameter and gradient moved to new storage, with its values: the tables the update
// graphs were captured over now point at tensors nothing else uses.
void ugt_reallocate(Pipeline& p) {
  for (layers::Parameter* param : p.model->parameters()) {
    param->value = Tensor::from_vector(param->value.to_vector(), param->value.shape(),
                                       param->value.stream());
    param->grad = Tensor::from_vector(param->grad.to_vector(), param->grad.shape(),
                                      param->grad.stream());
  }
}

// 2 steps, `rebuild`, 2 more (each on a runtime idle after step(), as between a trainer's
// steps): the parameters at the end.
std::vector<std::vector<float>> ugt_rebuilt(int first, bool graphs,
                                            const std::function<void(Pipeline&)>& rebuild) {
  Pipeline p(first, adamw, graphs);
  const std::vector<HostBatch> batches = test::random_batches(4, 8, 71);
  for (uint32_t k = 0; k < 2; ++k) p.runtime.step(batches[k], k);
  rebuild(p);
  for (uint32_t k = 2; k < 4; ++k) p.runtime.step(batches[k], k);
  return test::params_of(*p.model);
}

TEST_CASE("update graphs after a checkpoint is loaded in place: the bits of graphs off, and of "
          "the run it resumes") {
  testing::Deadline deadline("update graphs and a checkpoint loaded");
  // The state after 2 steps of the uninterrupted run, saved as a checkpoint would be.
  UgtSnapshot at_2;
  std::vector<std::vector<float>> uninterrupted;
  {
    Pipeline p(154, adamw, true);
    const std::vector<HostBatch> batches = test::random_batches(4, 8, 71);
    for (uint32_t k = 0; k < 4; ++k) {
      if (k == 2) at_2 = ugt_save(p);
      p.runtime.step(batches[k], k);
    }
    uninterrupted = test::params_of(*p.model);
  }
  // Another run's first 2 steps (other batches), then that checkpoint loaded: steps 2 and 3
  // must continue the uninterrupted run, Adam's counts and moments included.
  const auto resumed = [&](Pipeline& p) {
    const std::vector<HostBatch> other = test::random_batches(2, 8, 91);
    for (uint32_t k = 0; k < 2; ++k) p.runtime.step(other[k], k);
    ugt_load(p, at_2);
  };
  const auto on = ugt_rebuilt(157, true, resumed);
  check_same_bits(on, ugt_rebuilt(160, false, resumed));
  check_same_bits(on, uninterrupted);
}

TEST_CASE("update graphs after every parameter and gradient is reallocated: captured again, "
          "the bits of graphs off") {
  testing::Deadline deadline("update graphs and reallocated parameters");
  std::vector<std::vector<float>> at_rebuild;
  const auto reallocated = [&](Pipeline& p) {
    ugt_reallocate(p);
    at_rebuild = test::params_of(*p.model);
  };
  const auto on = ugt_rebuilt(163, true, reallocated);
  // A graph replaying its first capture would update the old tensors and leave these as they
  // were at the reallocation.
  REQUIRE(on.size() == at_rebuild.size());
  for (size_t i = 0; i < on.size(); ++i) {
    CAPTURE(i);
    CHECK(on[i] != at_rebuild[i]);
  }
  check_same_bits(on, ugt_rebuilt(166, false, reallocated));
}

// BRIGADE_TEST_CUDA_GRAPHS set to `value` (unset: nullptr) while it lives, then as it was.
struct UgtGraphsVariable {
  explicit UgtGraphsVariable(const char* value) {
    if (const char* old = std::getenv(kName)) saved = old;
    set(value);
  }
  ~UgtGraphsVariable() { set(saved ? saved->c_str() : nullptr); }
  static void set(const char* value) {
    if (value) setenv(kName, value, 1);
    else unsetenv(kName);
  }
  static constexpr const char* kName = "BRIGADE_TEST_CUDA_GRAPHS";
  std::optional<std::string> saved;
};

TEST_CASE("BRIGADE_TEST_CUDA_GRAPHS: unset or on, off; anything else an error naming it") {
  const RuntimeOptions asked{.seed = 3, .check_finite = true, .cuda_graphs = false};
  for (const char* value : {static_cast<const char*>(nullptr), "", "on", "off"}) {
    UgtGraphsVariable set(value);
    const RuntimeOptions got = test::runtime_options(asked);
    CHECK(got.cuda_graphs == !(value && std::string(value) == "off"));
    CHECK(got.seed == 3);  // the rest as asked
    CHECK(got.check_finite);
  }
  UgtGraphsVariable set("no");
  CHECK_THROWS_WITH_AS(test::runtime_options({}),
                       "BRIGADE_TEST_CUDA_GRAPHS=\"no\": expected on or off", Error);
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

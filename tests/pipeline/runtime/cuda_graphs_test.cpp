// A step as CUDA graphs (RuntimeOptions::cuda_graphs): each compute action of each stage and
// micro-batch (pipeline/runtime/device_graphs.h: sized at the first step, captured at the
// second, replayed after) and each stage's update (update_graph.h). The graphs must give the
// parameters of the same steps run with graphs off, to the bit — dropout's step, SGD's first
// step and Adam's bias correction change at every step, and they reach the replayed kernels
// through device memory only; a step of another shape between replays, a checkpoint loaded in
// place and parameters given new storage must be neither replayed wrongly nor lost. A failed
// step under graphs changes nothing and names its place; the steps after it are those of a
// run that never had it. Replays keep the memory they were captured with, no more, and about
// what the step has in use run eagerly, several stages on one device too. Run on the devices
// of BRIGADE_TEST_DEVICES (CI: 1, 2 and 4 emulated GPUs, every stage on one, both CUDA paths);
// on CPU devices graphs are ignored and the same checks hold, but for the peak memory's
// (on_cpu_the_peaks_are_two_eager_runs).
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// 3 stages of the test model on test_devices(3, first), 1F1B (or `schedule`) over 4
// micro-batches. The optimizers the runtime makes are kept, as brigade-train keeps them for
// its checkpoints.
struct Pipeline {
  Pipeline(int first, const OptimizerFactory& optimizer, bool graphs,
           const char* schedule = "1f1b")
      : partition(at_cuts(8, {2, 6})),
        model(test::placed_model(partition, 3, first)),
        runtime(*model, test::test_devices(3, first), partition, make_schedule(schedule, 3, 4),
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

// The parameters after a step on each of `batches` (8 samples each unless said), graphs on or
// off; under `schedule`.
std::vector<std::vector<float>> trained(int first, const OptimizerFactory& optimizer,
                                        bool graphs, int steps, const char* schedule = "1f1b",
                                        const std::vector<int64_t>& samples = {}) {
  Pipeline p(first, optimizer, graphs, schedule);
  for (int s = 0; s < steps; ++s) {
    const int64_t n = samples.empty() ? 8 : samples[static_cast<size_t>(s)];
    p.runtime.step(test::random_batch(n, 31 + static_cast<uint32_t>(s)), static_cast<uint32_t>(s));
  }
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

// 5 steps: sized, captured, then 3 replays.
TEST_CASE("CUDA graphs on and off: the same parameters to the bit, SGD with momentum") {
  testing::Deadline deadline("CUDA graphs, SGD");
  check_same_bits(trained(130, test::sgd, true, 5), trained(133, test::sgd, false, 5));
}

TEST_CASE("CUDA graphs on and off: the same parameters to the bit, AdamW") {
  testing::Deadline deadline("CUDA graphs, AdamW");
  check_same_bits(trained(136, adamw, true, 5), trained(139, adamw, false, 5));
}

// Zero-bubble's split backward: B keeps the tape and the output gradient for W, each a graph.
TEST_CASE("CUDA graphs on and off under ZB-H1: the same parameters to the bit") {
  testing::Deadline deadline("CUDA graphs, ZB-H1");
  check_same_bits(trained(180, adamw, true, 5, "zb-h1"), trained(183, adamw, false, 5, "zb-h1"));
}

// A step of 7 samples (micro-batches of 2, 2, 2, 1) between steps of 8, as an epoch's last
// batch: it runs kernel by kernel, and the steps after it replay the graphs captured before
// it; then steps of 7 only (sized, captured, replayed).
TEST_CASE("CUDA graphs with a step of another shape between replays: the bits of graphs off") {
  testing::Deadline deadline("CUDA graphs and another shape");
  const std::vector<int64_t> samples{8, 8, 8, 7, 8, 8, 7, 7, 7, 7};
  const int steps = static_cast<int>(samples.size());
  check_same_bits(trained(186, adamw, true, steps, "1f1b", samples),
                  trained(189, adamw, false, steps, "1f1b", samples));
}

// The graphs' memory is taken when they are captured and reused by every replay: the memory in
// use between steps does not grow with the steps replayed.
TEST_CASE("CUDA graphs: replayed steps keep the memory in use of the first replay") {
  testing::Deadline deadline("CUDA graphs' memory");
  Pipeline p(192, adamw, true);
  const auto in_use = [&] {
    std::vector<uint64_t> bytes;
    for (const Device& d : p.runtime.devices()) bytes.push_back(Allocator::of(d).stats().in_use);
    return bytes;
  };
  std::vector<uint64_t> after_first_replay;
  for (uint32_t k = 0; k < 6; ++k) {
    p.runtime.step(test::random_batch(8, 60 + k), k);
    if (k == 2) after_first_replay = in_use();
  }
  CHECK(in_use() == after_first_replay);
}

// What the graphs' arena may hold above an eager peak of `eager` bytes for its rounding of each
// tensor to 256 bytes: nothing where the eager step's blocks are rounded to their bins.
uint64_t unrounded_slack(uint64_t eager) { return Allocator::caching() ? 0 : eager / 100; }

// On a CPU device graphs are ignored, so a peak "replayed" is a second eager run's; and an
// eager step's peak on a CPU device depends on how far its host thread ran ahead of the
// device's stream (compute_lead.h) before the stream's tasks freed what they used: on a loaded
// machine two runs of the same step differed by 250 KiB, above the first check's margin. The
// checks compare the graphs' arena with the eager step, which only GPUs have.
bool on_cpu_the_peaks_are_two_eager_runs() {
  if (test::on_cuda()) return false;
  MESSAGE("on CPU devices graphs are ignored: no arena to weigh against the eager step");
  return true;
}

// The graphs' memory is planned from the eager step before (engine/graph_memory.h): one arena,
// in which only tensors whose lives overlap need bytes of their own. A replayed step then has
// in use what the same step has at its peak run eagerly, and the graphs' copies of the batch:
// the arena rounds each tensor up to 256 bytes, where the eager step's blocks are rounded up
// to their bins (up to a quarter), which covers what the greedy packing leaves above the exact
// peak. (Without the cache, BRIGADE_NO_MEMORY_CACHING=1, the eager step's blocks are exactly
// as asked, and the arena's rounding is above them: `unrounded_slack`, a percent.) Blocks
// shared whole (each as large as its largest tensor) held 9 % more than the eager peak on the
// question's network, and a block of its own for each size the step asks for up to twice it.
// One stage on one device, one micro-batch of 256 samples; the device's peak over a fourth
// step, the first run eagerly, the second replayed.
TEST_CASE("CUDA graphs: a replayed step has no more than the eager step's peak memory in use, "
          "and the graphs' copies of the batch") {
  testing::Deadline deadline("CUDA graphs' peak memory");
  if (on_cpu_the_peaks_are_two_eager_runs()) return;
  const auto peak_in_fourth_step = [](int first, bool graphs) {
    const Partition partition = at_cuts(8, {});
    const std::unique_ptr<layers::Sequential> model = test::placed_model(partition, 1, first);
    const Device device = test::test_devices(1, first)[0];
    Runtime runtime(*model, {device}, partition, make_schedule("gpipe", 1, 1), test::sgd,
                    RuntimeOptions{.seed = test::kDropoutSeed, .cuda_graphs = graphs});
    for (uint32_t k = 0; k < 3; ++k) runtime.step(test::random_batch(256, 80 + k), k);
    Allocator::of(device).reset_peak();
    runtime.step(test::random_batch(256, 83), 3);
    return Allocator::of(device).stats().peak_in_use;
  };
  const uint64_t eager = peak_in_fourth_step(196, false);
  const uint64_t replayed = peak_in_fourth_step(199, true);
  const HostBatch batch = test::random_batch(256, 83);
  const uint64_t batch_copies =
      batch.x.size() * sizeof(float) + batch.labels.size() * sizeof(int32_t);
  CAPTURE(eager);
  CAPTURE(batch_copies);
  CHECK(replayed <= eager + batch_copies + unrounded_slack(eager));
}

// Several stages on one device, as --chunks places them on a machine with one GPU: what an
// action hands to the next stage there (and the loss to its backward) is read by that stage's
// graph in place, not copied, and its bytes serve later requests once read, as the eager step
// frees it (device_graphs.h). Beyond the eager step's peak the graphs then hold only their
// copies of what comes from elsewhere: each micro-batch's samples and labels. 3 stages on one
// device (interleaved-1f1b, 3 chunks), 4 micro-batches of 1024 samples; the device's peak over a
// fourth step, eager against replayed: at most those copies more (the test above says why),
// where blocks shared whole held a quarter more besides, and copying every input and keeping
// every output 5x them.
TEST_CASE("CUDA graphs: several stages on one device hold beyond the eager step's peak only "
          "their copies of the batch") {
  testing::Deadline deadline("CUDA graphs' peak memory, several stages on one device");
  if (on_cpu_the_peaks_are_two_eager_runs()) return;
  const HostBatch warmup = test::random_batch(4096, 90), measured = test::random_batch(4096, 93);
  const auto peak_in_fourth_step = [&](int first, bool graphs) {
    const Partition partition = at_cuts(8, {2, 6});
    const std::unique_ptr<layers::Sequential> model = test::placed_model(partition, 1, first);
    const Device device = test::test_devices(1, first)[0];
    Runtime runtime(*model, {device}, partition, make_schedule("interleaved-1f1b", 1, 4, 3),
                    test::sgd, RuntimeOptions{.seed = test::kDropoutSeed, .cuda_graphs = graphs});
    for (uint32_t k = 0; k < 3; ++k) runtime.step(warmup, k);
    Allocator::of(device).reset_peak();
    runtime.step(measured, 3);
    return Allocator::of(device).stats().peak_in_use;
  };
  const uint64_t eager = peak_in_fourth_step(202, false);
  const uint64_t replayed = peak_in_fourth_step(205, true);
  const uint64_t batch_copies =
      measured.x.size() * sizeof(float) + measured.labels.size() * sizeof(int32_t);
  CAPTURE(eager);
  CAPTURE(batch_copies);
  CHECK(replayed <= eager + batch_copies + unrounded_slack(eager));
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

// 3 steps (sized, captured, replayed), `rebuild`, 3 more (each on a runtime idle after
// step(), as between a trainer's steps): the parameters at the end.
std::vector<std::vector<float>> ugt_rebuilt(int first, bool graphs,
                                            const std::function<void(Pipeline&)>& rebuild) {
  Pipeline p(first, adamw, graphs);
  const std::vector<HostBatch> batches = test::random_batches(6, 8, 71);
  for (uint32_t k = 0; k < 3; ++k) p.runtime.step(batches[k], k);
  rebuild(p);
  for (uint32_t k = 3; k < 6; ++k) p.runtime.step(batches[k], k);
  return test::params_of(*p.model);
}

TEST_CASE("CUDA graphs after a checkpoint is loaded in place: the bits of graphs off, and of "
          "the run it resumes") {
  testing::Deadline deadline("CUDA graphs and a checkpoint loaded");
  // The state after 3 steps of the uninterrupted run, saved as a checkpoint would be.
  UgtSnapshot at_3;
  std::vector<std::vector<float>> uninterrupted;
  {
    Pipeline p(154, adamw, true);
    const std::vector<HostBatch> batches = test::random_batches(6, 8, 71);
    for (uint32_t k = 0; k < 6; ++k) {
      if (k == 3) at_3 = ugt_save(p);
      p.runtime.step(batches[k], k);
    }
    uninterrupted = test::params_of(*p.model);
  }
  // Another run's first 3 steps (other batches), then that checkpoint loaded: steps 3 to 5
  // must continue the uninterrupted run, Adam's counts and moments included.
  const auto resumed = [&](Pipeline& p) {
    const std::vector<HostBatch> other = test::random_batches(3, 8, 91);
    for (uint32_t k = 0; k < 3; ++k) p.runtime.step(other[k], k);
    ugt_load(p, at_3);
  };
  const auto on = ugt_rebuilt(157, true, resumed);
  check_same_bits(on, ugt_rebuilt(160, false, resumed));
  check_same_bits(on, uninterrupted);
}

TEST_CASE("CUDA graphs after every parameter and gradient is reallocated: captured again, "
          "the bits of graphs off") {
  testing::Deadline deadline("CUDA graphs and reallocated parameters");
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

TEST_CASE("a failed step under CUDA graphs: nothing changed, its place named, then the "
          "steps of a run without it") {
  testing::Deadline deadline("a failed step under CUDA graphs");
  const std::vector<HostBatch> batches = test::random_batches(2, 8, 41);
  HostBatch bad = batches[1];
  bad.labels[5] = 7;  // 3 classes; 4 micro-batches of 2: micro-batch 2, its row 1
  Pipeline failed(142, adamw, true);
  Pipeline clean(145, adamw, true);
  // The graphs are sized at the first step, captured at the second (the update's at the
  // first), and the failed step replays them: its failure is named from the notes the replay
  // made again.
  failed.runtime.step(batches[0], 0);
  failed.runtime.step(batches[0], 1);
  clean.runtime.step(batches[0], 0);
  clean.runtime.step(batches[0], 1);
  const std::vector<std::vector<float>> before = test::params_of(*failed.model);
  try {
    failed.runtime.step(bad, 2);
    FAIL("the step did not fail");
  } catch (const PipelineError& e) {
    CAPTURE(std::string(e.what()));
    CHECK(e.stage() == 2);
    REQUIRE(e.action().has_value());
    CHECK(*e.action() == Action{2, Op::F, 2});
    CHECK(std::string(e.what()).find("label 7 of row 1 is outside [0, 3)") != std::string::npos);
  }
  check_same_bits(test::params_of(*failed.model), before);
  const StepResult after = failed.runtime.step(batches[1], 3);
  const StepResult expected = clean.runtime.step(batches[1], 3);
  CHECK(after.loss == expected.loss);
  // The failed step's gradients did not leak into the next, and Adam counts 3 steps on both.
  check_same_bits(test::params_of(*failed.model), test::params_of(*clean.model));
}

}  // namespace
}  // namespace brigade::pipeline

// A batch the caller staged on the devices (runtime.h: StagedBatch) trains exactly like the
// same batch handed over as host vectors, and a step counts its right predictions.
//
// The staged batch here is written the way the trainer's staging area writes it: by tasks on
// a stream of its own that the step does not know, held back by a Gate. Another thread opens
// the gate only once the first stage's stream is blocked on the inputs' event (engine's
// describe_streams() says so), or once step() has returned. A runtime that ignored the
// inputs' event would read them before they are written (or, waiting only on the labels,
// hang until the Deadline reports it): this test fails it every time.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"
#include "tests/support/gate.h"

namespace brigade::pipeline {
namespace {

constexpr int kStages = 2, kMicro = 3;
constexpr int64_t kBatch = 11;  // 4 + 4 + 3: the last micro-batch is smaller

Partition two_stages() {
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  return balance(layer_costs(shapes, CostKind::flops), kStages);
}

// The host batch cut as microbatch_rows into tensors on `first` (inputs) and `last` (labels)
// for `writer`, which writes the inputs, records inputs_ready, writes the labels and records
// labels_ready — all once `gate` opens.
StagedBatch stage_later(const HostBatch& b, const Device& first, const Device& last,
                        const Stream& writer, testing::Gate& gate) {
  BRIGADE_CHECK(writer.device() == first, "the writer is a stream of the first device");
  StagedBatch staged;
  writer.enqueue(gate.blocker());
  const std::vector<int64_t> rows = microbatch_rows(b.shape[0], kMicro);
  int64_t offset = 0;
  for (int64_t n : rows) {
    const Tensor x = Tensor::empty(Shape({n, 1, 8, 8}), writer);  // (n, 1, 8, 8)
    const float* src = b.x.data() + offset * 64;
    writer.enqueue([x, src, n] {
      std::memcpy(x.data<float>(), src, static_cast<size_t>(n * 64) * sizeof(float));
    });
    staged.inputs.push_back(x);
    offset += n;
  }
  staged.inputs_ready.record(writer);
  offset = 0;
  for (int64_t n : rows) {
    const Tensor y = Tensor::empty(Shape({n}), last);  // (n) int32 bits
    y.record_stream(writer);
    const int32_t* labels = b.labels.data() + offset;
    writer.enqueue([y, labels, n] {
      std::memcpy(y.data<float>(), labels, static_cast<size_t>(n) * sizeof(int32_t));
    });
    staged.labels.push_back(y);
    offset += n;
  }
  staged.labels_ready.record(writer);
  return staged;
}

TEST_CASE("microbatch_rows: n/m each, the first n mod m one larger; never an empty one") {
  CHECK(microbatch_rows(11, 3) == std::vector<int64_t>{4, 4, 3});
  CHECK(microbatch_rows(12, 3) == std::vector<int64_t>{4, 4, 4});
  CHECK(microbatch_rows(3, 3) == std::vector<int64_t>{1, 1, 1});
  CHECK(testing::error_text<Error>([] { microbatch_rows(2, 3); }) ==
        "runtime: a mini-batch of 2 samples cannot be cut into 3 micro-batches");
}

TEST_CASE("largest_microbatch_rows is the first of microbatch_rows, for every n >= m") {
  for (int m = 1; m <= 9; ++m)
    for (int64_t n = m; n <= 40; ++n) {
      CAPTURE(m);
      CAPTURE(n);
      CHECK(largest_microbatch_rows(n, m) == microbatch_rows(n, m).front());
    }
  CHECK(largest_microbatch_rows(2, 3) == 1);  // weighed too where a run would refuse the cut
}

TEST_CASE("a staged batch trains bit-exactly like the same batch as host vectors") {
  if (test::on_cuda()) return;  // the writer below is a host task: CPU devices only
  testing::Deadline deadline("staged batch");
  const Partition partition = two_stages();
  const Schedule schedule = make_schedule("1f1b", kStages, kMicro);
  auto host_model = test::placed_model(partition, kStages, 70);
  auto staged_model = test::placed_model(partition, kStages, 72);
  Runtime host_runtime(*host_model, test::test_devices(kStages, 70), partition, schedule,
                       test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  Runtime staged_runtime(*staged_model, test::test_devices(kStages, 72), partition, schedule,
                         test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  const Stream writer = Stream::create(Device::cpu(72));
  for (uint32_t step = 0; step < 3; ++step) {
    const HostBatch b = test::random_batch(kBatch, 300 + step);
    const StepResult want = host_runtime.step(b, step);
    testing::Gate gate;
    const StagedBatch staged = stage_later(b, Device::cpu(72), Device::cpu(73), writer, gate);
    std::atomic<bool> returned{false};
    std::thread opener([&] {
      const std::string waiting = "blocked on " + staged.inputs_ready.str();
      while (!returned.load() && describe_streams().find(waiting) == std::string::npos)
        std::this_thread::yield();
      gate.open();
    });
    StepResult got;
    try {
      got = staged_runtime.step(staged, step);
    } catch (...) {
      returned = true;
      opener.join();
      throw;
    }
    returned = true;
    opener.join();
    CHECK(got.loss == want.loss);
    CHECK(got.correct == want.correct);
  }
  const auto want = test::params_of(*host_model), got = test::params_of(*staged_model);
  REQUIRE(got.size() == want.size());
  for (size_t t = 0; t < got.size(); ++t) CHECK(got[t] == want[t]);
}

TEST_CASE("a step counts the samples whose largest logit is their label") {
  testing::Deadline deadline("correct count");
  const Partition partition = two_stages();
  auto model = test::placed_model(partition, kStages, 74);
  Runtime runtime(*model, test::test_devices(kStages, 74), partition,
                  make_schedule("1f1b", kStages, kMicro), test::sgd,
                  test::runtime_options({.seed = test::kDropoutSeed}));
  const HostBatch b = test::random_batch(kBatch, 400);
  // The same forward on one device before the step's update: same parameters (same seed),
  // same dropout masks (seed, step 0, sample offsets), counted micro-batch by micro-batch.
  const Device device = test::reference_device();
  auto reference = layers::Sequential::from_spec(test::small_spec(), {device}, test::kModelSeed);
  const Stream s = Stream::default_for(device);
  int64_t want = 0, offset = 0;
  for (int64_t rows : microbatch_rows(kBatch, kMicro)) {
    layers::ForwardContext ctx;
    ctx.seed = test::kDropoutSeed;
    ctx.step = 0;
    ctx.sample_offset = offset;
    ctx.streams = {{device, s}};
    const Tensor x = Tensor::from_vector(
        std::vector<float>(b.x.begin() + offset * 64, b.x.begin() + (offset + rows) * 64),
        Shape({rows, 1, 8, 8}), s);
    want += ops::accuracy_count(
        reference->forward(x, ctx),
        ops::labels_tensor({b.labels.begin() + offset, b.labels.begin() + offset + rows}, s), s);
    offset += rows;
  }
  CHECK(runtime.step(b, 0).correct == want);
}

TEST_CASE("a staged batch that does not fit the schedule or the devices is refused") {
  if (test::on_cuda()) return;  // names CPU devices
  testing::Deadline deadline("bad staged batch");
  const Partition partition = two_stages();
  auto model = test::placed_model(partition, kStages, 76);
  Runtime runtime(*model, test::test_devices(kStages, 76), partition,
                  make_schedule("1f1b", kStages, kMicro), test::sgd, test::runtime_options({}));
  const auto batch = [](int micro, const Device& first, const Device& last, int64_t label_rows) {
    StagedBatch b;
    for (int i = 0; i < micro; ++i) {
      b.inputs.push_back(Tensor::zeros(Shape({2, 1, 8, 8}), first));
      b.labels.push_back(Tensor::zeros(Shape({label_rows}), last));
    }
    return b;
  };
  const Device d0 = Device::cpu(76), d1 = Device::cpu(77);
  CHECK(testing::error_text<Error>([&] { runtime.step(batch(2, d0, d1, 2), 0); }) ==
        "runtime: a staged batch of 2 inputs and 2 labels for a schedule of 3 micro-batches");
  CHECK(testing::error_text<Error>([&] { runtime.step(batch(3, d1, d1, 2), 0); }) ==
        "runtime: staged micro-batch 0 has its inputs on cpu:77 and labels on cpu:77; the "
        "first stage runs on cpu:76 and the last on cpu:77");
  CHECK(testing::error_text<Error>([&] { runtime.step(batch(3, d0, d1, 3), 0); }) ==
        "runtime: staged micro-batch 0 has inputs float32 (2, 1, 8, 8) on cpu:76 and labels "
        "float32 (3) on cpu:77");
  // Refused before any work: the runtime still trains.
  CHECK(runtime.step(test::random_batch(kBatch, 500), 0).loss > 0);
}

}  // namespace
}  // namespace brigade::pipeline

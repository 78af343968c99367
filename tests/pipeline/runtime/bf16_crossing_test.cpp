// What crosses between stages in a bf16 run (kernels/precision.h): activations and input
// gradients in bf16 storage, two bytes an element, counted in StepResult::sent_bytes. The count
// is checked against the bytes worked out from the cut's shapes, for fp32 (four bytes) and
// bf16 (two), on a few schedules and cuts, on CPU devices or GPUs (BRIGADE_TEST_DEVICES,
// runtime_model.h; either CUDA path); the training it carries is checked bit for bit in
// parity_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "kernels/precision.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/precision_for.h"

namespace brigade::pipeline {
namespace {

constexpr int64_t kBatch = 12;

using brigade::testing::PrecisionFor;

// The bytes one step sends with `element` bytes an element: at every cut between stages on two
// devices, each sample's activation goes forward and its gradient comes back.
uint64_t bytes_by_hand(const Schedule& schedule, const Partition& partition,
                       const model::ModelShapes& shapes, uint64_t element) {
  uint64_t bytes = 0;
  for (int s = 0; s + 1 < schedule.stages(); ++s) {
    if (schedule.device_of(s) == schedule.device_of(s + 1)) continue;
    const auto& out = shapes.layers[partition.stages[static_cast<size_t>(s)].end - 1].output;
    uint64_t per_sample = 1;
    for (size_t i = 1; i < out.size(); ++i) per_sample *= static_cast<uint64_t>(out[i]);
    bytes += 2 * kBatch * per_sample * element;
  }
  return bytes;
}

TEST_CASE("a bf16 run sends half an fp32 run's bytes between stages") {
  const HostBatch batch = test::random_batch(kBatch, 7);
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  struct Case {
    std::string schedule;
    int p, m;
  };
  for (const Case& c : {Case{"gpipe", 1, 3}, Case{"1f1b", 2, 3}, Case{"zb-h1", 3, 4},
                        Case{"interleaved-1f1b", 2, 4}}) {
    CAPTURE(c.schedule);
    CAPTURE(c.p);
    const Schedule schedule = make_schedule(c.schedule, c.p, c.m, default_chunks(c.schedule));
    const Partition partition = balance(layer_costs(shapes, CostKind::flops), schedule.stages(),
                                        c.p, schedule.placement);
    const auto sent = [&](Precision precision) {
      const PrecisionFor in(precision);
      auto model = test::placed_model(partition, c.p, /*first_device=*/1, schedule.placement);
      Runtime runtime(*model, test::test_devices(c.p, 1), partition, schedule, test::sgd,
                      test::runtime_options({.seed = test::kDropoutSeed}));
      return runtime.step(batch, 0).sent_bytes;
    };
    const uint64_t fp32 = sent(Precision::fp32), bf16 = sent(Precision::bf16);
    CHECK(fp32 == bytes_by_hand(schedule, partition, shapes, 4));
    CHECK(bf16 == bytes_by_hand(schedule, partition, shapes, 2));
    CHECK(2 * bf16 == fp32);
    CHECK((c.p == 1) == (fp32 == 0));  // one device sends nothing
  }
}

}  // namespace
}  // namespace brigade::pipeline

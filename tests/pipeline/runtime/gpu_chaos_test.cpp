// The pipeline on emulated GPUs under BRIGADE_EMU_CHAOS (an -Dcuda=emulated build with
// BRIGADE_TEST_DEVICES=cuda or cuda:all; the test is empty elsewhere): random delays in every
// stream and after host calls (kernels/emu/cudart/chaos.cpp) move when each piece of work
// completes, and nothing else. A runtime whose every consumer waits for its producer gives the
// same bits under every seed as without delays; one that relies on timing somewhere gives
// others, or NaN where a freed block was poisoned (engine/allocator.cpp).
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>

#include <optional>
#include <string>
#include <tuple>

#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// The parameters after three steps of `name` on p stages (the parity matrix's set-up).
std::vector<std::vector<float>> trained(const std::string& name, int p, int m) {
  const auto data = test::random_batches(3, 12, 100);
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const Schedule schedule = make_schedule(name, p, m, default_chunks(name));
  const Partition partition = balance(layer_costs(shapes, CostKind::flops), schedule.stages(), p,
                                      schedule.placement);
  auto model = test::placed_model(partition, p, /*first_device=*/0, schedule.placement);
  Runtime runtime(*model, test::test_devices(p, 0), partition, schedule, test::sgd,
                  test::runtime_options({.seed = test::kDropoutSeed}));
  for (uint32_t step = 0; step < 3; ++step) runtime.step(data[step], step);
  return test::params_of(*model);
}

TEST_CASE("under BRIGADE_EMU_CHAOS seeds 1, 2, 3 a pipeline on GPUs trains to the same bits") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: no GPU to shake");
    return;
  }
  testing::Deadline deadline("pipeline under chaos", std::chrono::seconds(300));
  const std::optional<uint64_t> outside = emu::gpu::set_chaos_seed(std::nullopt);
  using Case = std::tuple<std::string, int, int>;  // schedule, stages, micro-batches
  for (const Case& c : {Case{"1f1b", 3, 4}, Case{"zb-h1", 2, 5}, Case{"interleaved-1f1b", 2, 4}}) {
    const std::string& name = std::get<0>(c);
    const int p = std::get<1>(c), m = std::get<2>(c);
    CAPTURE(name);
    emu::gpu::set_chaos_seed(std::nullopt);
    const auto calm = trained(name, p, m);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      CAPTURE(seed);
      emu::gpu::set_chaos_seed(seed);
      test::check_close(trained(name, p, m), calm, /*exact=*/true);
    }
  }
  emu::gpu::set_chaos_seed(outside);
}

}  // namespace
}  // namespace brigade::pipeline
#endif

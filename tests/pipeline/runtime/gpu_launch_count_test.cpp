// The hand-written CUDA path's launches per training step do not grow with the batch, on
// emulated GPUs (an -Dcuda=emulated build; the test is empty elsewhere): every kernel works on
// a whole micro-batch (a conv's im2col, GEMM and col2im included), none runs once per sample.
// Counted by the emulated runtime through the very step `brigade-bench --count-calls` counts
// (tools/bench/call_count_bench.h).
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <chrono>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tools/bench/call_count_bench.h"

namespace brigade::pipeline {
namespace {

TEST_CASE("hand-written path: a training step launches as many kernels at batch 32 as at 128") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: no GPU to count launches on");
    return;
  }
  testing::Deadline deadline("launches per step on the hand-written path",
                             std::chrono::seconds(500));
  // The question's network (every layer kind, four convolutions) at its own 28x28 input.
  const model::ModelSpec spec =
      model::load_model_file(std::string(BRIGADE_SOURCE_ROOT) + "/tools/models/seed_cnn.model");
  bench::CallCountOptions o;  // cuda:0, warm-up steps
  o.impls = {"handwritten"};
  o.batches = {32, 128};
  o.steps = 1;
  o.cuda_graphs = false;  // the kernels themselves launched, not a graph of them
  const std::vector<bench::CallCountRow> rows = bench::count_calls(spec, o);
  REQUIRE(rows.size() == 2);
  INFO("launches per step: " << rows[0].kernel_launches << " at batch 32, "
                             << rows[1].kernel_launches << " at 128");
  CHECK(rows[0].kernel_launches > 0);
  CHECK(rows[0].kernel_launches == rows[1].kernel_launches);
  // The host waits as on the vendor path (gpu_call_budget_test.cpp): once per step, at its
  // end; the checks' verdict stays on the GPU until then.
  for (const bench::CallCountRow& r : rows) CHECK(r.host_blocking <= 1);
}

}  // namespace
}  // namespace brigade::pipeline

#endif  // BRIGADE_CUDA_EMULATED

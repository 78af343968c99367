// The launch budget of a GPU training step, on emulated GPUs (an -Dcuda=emulated
// build; the test is empty elsewhere): the question's network (tools/models/seed_cnn.model) at
// batch 128 as one stage on cuda:0, the cuDNN/cuBLAS path, counted by the emulated runtime
// (kernels/emu/cudart/README.md, "Counting calls") through the very step `brigade-bench
// --count-calls` counts (tools/bench/call_count_bench.h: the pipeline runtime's step, one
// micro-batch, SGD with momentum). Counts, not times: exact, the same on every run.
//
// What the step costs with graphs off (measured here, batch 128): 18 kernel launches + 27
// library calls = 45. The library calls: per convolution one fused forward (conv + bias + ReLU),
// backward-data (not for the first), backward-filter and backward-bias; per max-pool a
// forward and a backward; the dense layers' six GEMMs. The launches: dropout forward and
// backward (4), the ReLU masks of the backward (5), the dense biases and their gradients (4),
// the loss (2), the tally (1: the accuracy count, and the label check into the step's verdict,
// pipeline/runtime/step_verdict.h, in the same launch), the optimizer (1: every parameter,
// obeying the verdict) and zero_grad (1: every gradient). Host-blocking calls: none inside a
// step; 1 between two, the host waiting, once the next step is enqueued, for an event after
// all of the step before's work, which also brings that step's loss, correct count and
// verdict back (step_tally.h, step_verdict.h).
// (Before the verdict lived on the GPU, a host stream copied the loss's label status to the
// host and the update waited for it: 4 to 5 per step.)
//
// With the update as a CUDA graph (RuntimeOptions::cuda_graphs, on by default: pipeline/
// runtime/update_graph.h), the optimizer's and zero_grad's launches are one graph launch:
// 16 kernel launches + 27 library calls = 43, and 1 graph launch.
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <chrono>
#include <string>

#include "layers/model/model_file.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tools/bench/call_count_bench.h"

namespace brigade::pipeline {
namespace {

// One step on cuda:0 at batch 128, the vendor path, counted (after a warm-up step, which
// captures the graphs when they are on).
bench::CallCountRow counted_step(bool cuda_graphs) {
  const model::ModelSpec spec =
      model::load_model_file(std::string(BRIGADE_SOURCE_ROOT) + "/tools/models/seed_cnn.model");
  bench::CallCountOptions o;  // cuda:0, batch 128, a warm-up step
  o.impls = {"vendor"};
  o.steps = 1;
  o.cuda_graphs = cuda_graphs;
  const std::vector<bench::CallCountRow> rows = bench::count_calls(spec, o);
  REQUIRE(rows.size() == 1);
  return rows[0];
}

TEST_CASE("a GPU step's budget: at most 43 launches + library calls and 1 graph launch, no host "
          "wait inside a step and 1 between steps, vendor path, batch 128, update graphs on; "
          "off, 2 launches in place of the graph") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("the launch budget of a step", std::chrono::seconds(500));
  const bench::CallCountRow r = counted_step(true);
  CAPTURE(r.kernel_launches);
  CAPTURE(r.library_calls);
  CHECK(r.kernel_launches + r.library_calls <= 43);
  CHECK(r.graph_launches == 1);  // the one stage's update and zeroing
  // The host never waits inside a step: submitted with none pending, it returns without a
  // wait. Between two steps the host waits once, for the step before, after enqueueing the
  // next (pipeline::Runtime::submit). The step staged its batch before: brigade-train's
  // staging does.
  CHECK(r.host_blocking_inside == 0);
  CHECK(r.host_blocking == 1);

  // Graphs off: the update's two launches (the optimizer's, zero_grad's) come back in place
  // of the graph's one; nothing else changes.
  const bench::CallCountRow off = counted_step(false);
  CHECK(off.graph_launches == 0);
  CHECK(off.kernel_launches == r.kernel_launches + 2);
  CHECK(off.library_calls == r.library_calls);
  CHECK(off.host_blocking_inside == 0);
  CHECK(off.host_blocking == r.host_blocking);
}

}  // namespace
}  // namespace brigade::pipeline
#endif

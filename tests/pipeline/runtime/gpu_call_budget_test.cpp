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
// With CUDA graphs (RuntimeOptions::cuda_graphs, on by default), the step is graph launches
// only: the one stage's F and BW for the one micro-batch (pipeline/runtime/device_graphs.h), and
// its update with the zeroing of its gradients (update_graph.h): 3 graph launches, no kernel
// launch and no library call outside them. A pipeline of any schedule: one graph launch per
// compute action and one per stage's update (the case at the end).
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <chrono>
#include <cstdint>
#include <string>

#include <cuda_emulation.h>

#include "kernels/precision.h"
#include "layers/model/model_file.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"
#include "tests/support/precision_for.h"
#include "tools/bench/call_count_bench.h"

namespace brigade::pipeline {
namespace {

// One step on cuda:0 at `batch` (128 unless said), the vendor path unless said, counted (after
// the warm-up steps, which size and capture the graphs when they are on), every entry point
// listed.
bench::CallCountRow counted_step(bool cuda_graphs, int64_t batch = 128,
                                 const std::string& impl = "vendor") {
  const model::ModelSpec spec =
      model::load_model_file(std::string(BRIGADE_SOURCE_ROOT) + "/tools/models/seed_cnn.model");
  bench::CallCountOptions o;  // cuda:0, warm-up steps
  o.impls = {impl};
  o.batches = {batch};
  o.steps = 1;
  o.cuda_graphs = cuda_graphs;
  o.top = 1000;
  const std::vector<bench::CallCountRow> rows = bench::count_calls(spec, o);
  REQUIRE(rows.size() == 1);
  return rows[0];
}

TEST_CASE("a GPU step's budget, vendor path, batch 128: graphs on, 3 graph launches and nothing "
          "else; off, at most 45 launches + library calls; no host wait inside a step and 1 "
          "between steps") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("the launch budget of a step", std::chrono::seconds(500));
  const bench::CallCountRow r = counted_step(true);
  CAPTURE(r.kernel_launches);
  CAPTURE(r.library_calls);
  CHECK(r.kernel_launches == 0);
  CHECK(r.library_calls == 0);
  CHECK(r.graph_launches == 3);  // F, BW (2 per micro-batch) and the update
  // The host never waits inside a step: submitted with none pending, it returns without a
  // wait. Between two steps the host waits once, for the step before, after enqueueing the
  // next (pipeline::Runtime::submit). The step staged its batch before: brigade-train's
  // staging does.
  CHECK(r.host_blocking_inside == 0);
  CHECK(r.host_blocking == 1);

  // Graphs off: every kernel and library call issued by the host.
  const bench::CallCountRow off = counted_step(false);
  CAPTURE(off.kernel_launches);
  CAPTURE(off.library_calls);
  CHECK(off.graph_launches == 0);
  CHECK(off.kernel_launches + off.library_calls <= 45);
  CHECK(off.library_calls == 27);
  CHECK(off.host_blocking_inside == 0);
  CHECK(off.host_blocking == r.host_blocking);
}

// The calls of entry point `name` in a counted step (0 when it was not called).
double calls_of(const bench::CallCountRow& r, const std::string& name) {
  for (const auto& [entry, n] : r.top)
    if (entry == name) return n;
  return 0;
}

// bf16 on the vendor path (kernels/precision.h): each of the dense layers' GEMMs is one
// cublasGemmEx on bf16 operands (tensor cores) in place of one cublasSgemm, and the
// convolutions make the same cuDNN calls (fp32 on bf16 values), so a step's library calls are
// fp32's. The kernel launches it adds, per micro-batch, the same at any batch (the question's
// network: 12 layers, the last two Dropout(0.5) -> Dense; conv2d_1 computes no input
// gradient):
//   14  roundings at layer boundaries: each layer's output (12) and input gradient (11) is
//       rounded to bf16 values (layers/bf16_boundary.h), except where it already holds them:
//       Flatten's two (views of bf16 values); and not by a pass of its own where a hand-written
//       kernel writes it and rounds as it stores (ops::Bf16Rounding): the two Dropouts' outputs
//       and input gradients (4), the two Dense outputs (add_bias_rows, after cuBLAS: 2), and
//       conv2d_2's input gradient, which the ReLU mask of conv2d_1 writes after cuDNN (1).
//       What is left is a library's result: the four convolutions' outputs (cuDNN's fused
//       conv + bias + ReLU), the three max-pools' outputs and input gradients (cuDNN), the input
//       gradients of conv2d_3 and conv2d_4 (cuDNN, no mask: their inputs are max-pools') and of
//       the two Dense (cuBLAS): 4 + 6 + 2 + 2. A cuDNN or cuBLAS call cannot round inside, and
//       no hand-written kernel writes those tensors after it;
//    6  narrowings of Dense's operands to bfloat16 storage, per layer: x once for the forward
//       and the weight gradient, dy (after the ReLU's mask) once for the backward-data and the
//       weight gradient (ops::dense_operand), and the weights once for the forward and
//       backward-data (ops::dense_weights), each kept on the layer's tape node. The bias
//       gradient still sums the float dy (the last Dense's dy is the loss's float gradient);
//    5  roundings of a Conv2D's operands for cuDNN: the weights, once for forward and
//       backward-data (4: ops::conv2d_weights), and the data for conv2d_1, once for forward and
//       backward-filter (1: ops::conv2d_operand); every other x and dy of a convolution is a layer
//       boundary's, bf16 values already.
// 25 in all. Before the kernels rounded what they write (the same bits: the rounding is the last
// thing applied to the value stored, as the separate pass applied it) and each weighted layer
// made its input's and output gradient's GEMM forms once, 37. Before that, the 13 other
// convolution operands and Flatten's two were rounded again, and each weighted layer's weights
// were narrowed or rounded for the backward-data once more (5): 73 launches in all, the same
// bits (rounding a bf16 value leaves it as it is). Counted at a small batch: a step's calls do
// not depend on it on this path (the budget above is at 128).
constexpr int64_t kBudgetBf16VendorLaunches = 14 + 6 + 5;

// A step on `impl` counted in fp32 at batch 8, and in bf16 at batches 8 and 16, with graphs
// off, so that the launches are the host's to count; and in bf16 at batch 8 with graphs on.
struct BudgetBf16Steps {
  bench::CallCountRow fp32, bf16, bf16_wider, bf16_graphs;
};
BudgetBf16Steps budget_bf16_steps(const std::string& impl) {
  BudgetBf16Steps r;
  r.fp32 = counted_step(false, 8, impl);
  const testing::PrecisionFor in_bf16(Precision::bf16);
  r.bf16 = counted_step(false, 8, impl);
  r.bf16_wider = counted_step(false, 16, impl);
  r.bf16_graphs = counted_step(true, 8, impl);
  return r;
}

TEST_CASE("bf16 on the vendor path: a cublasGemmEx for each fp32 cublasSgemm, the same library "
          "calls, and 25 launches more than fp32 at any batch") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("a bf16 step's calls", std::chrono::seconds(300));
  const BudgetBf16Steps steps = budget_bf16_steps("vendor");
  const bench::CallCountRow &fp32 = steps.fp32, &bf16 = steps.bf16, &bf16_wider = steps.bf16_wider;
  CAPTURE(fp32.library_calls);
  CAPTURE(fp32.kernel_launches);
  CAPTURE(bf16.kernel_launches);
  CHECK(fp32.precision == "fp32");
  CHECK(bf16.precision == "bf16");
  CHECK(calls_of(fp32, "cublasSgemm_v2") == 6);  // the dense layers' three GEMMs each
  CHECK(calls_of(fp32, "cublasGemmEx") == 0);
  CHECK(calls_of(bf16, "cublasGemmEx") == 6);
  CHECK(calls_of(bf16, "cublasSgemm_v2") == 0);
  CHECK(bf16.library_calls == fp32.library_calls);
  CHECK(bf16.kernel_launches == fp32.kernel_launches + kBudgetBf16VendorLaunches);
  CHECK(bf16_wider.kernel_launches == bf16.kernel_launches);
  CHECK(bf16_wider.library_calls == bf16.library_calls);
  // Nothing of fp32's host protocol changes: the GPU's verdict, no wait inside a step, and
  // with graphs the step is its 3 graph launches.
  CHECK(bf16.host_blocking_inside == 0);
  CHECK(bf16.host_blocking == 1);
  CHECK(steps.bf16_graphs.graph_launches == 3);
  CHECK(steps.bf16_graphs.kernel_launches + steps.bf16_graphs.library_calls == 0);
}

// A pipeline of two stages on the test's GPUs (one GPU holding both, or one each), 4
// micro-batches: once its graphs are captured, a step is one graph launch per compute action
// (F and BW per stage and micro-batch; F, B and W under zero-bubble's split backward) and one
// per stage's update, and nothing else on the GPUs.
TEST_CASE("graphs on: a pipeline's step is one graph launch per compute action and per stage's "
          "update, under 1F1B and ZB-H1") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("a pipeline step's graph launches", std::chrono::seconds(300));
  for (const char* name : {"1f1b", "zb-h1"}) {
    CAPTURE(name);
    const Partition partition = at_cuts(8, {4});
    const Schedule schedule = make_schedule(name, 2, 4);
    auto model = test::placed_model(partition, 2, 71);
    Runtime runtime(*model, test::test_devices(2, 71), partition, schedule, test::sgd,
                    {.seed = test::kDropoutSeed});
    const HostBatch batch = test::random_batch(16, 4);
    for (uint32_t step = 0; step < 2; ++step) runtime.step(batch, step);  // sized, then captured
    const emu::gpu::CallCounts before = emu::gpu::call_counts();
    runtime.step(batch, 2);
    const emu::gpu::CallCounts d = emu::gpu::call_counts().since(before);
    CHECK(d.kernel_launches == 0);
    CHECK(d.library_calls == 0);
    CHECK(d.graph_launches == schedule.total_actions() + 2);
  }
}

// bf16 on the hand-written path: Dense and Conv2D both run gemm_mma_bf16 on operands narrowed
// to bfloat16 storage, every one of them, bf16 values or not (tensor cores read the storage,
// not the floats). The launches added per micro-batch, at any batch:
//    0  roundings at layer boundaries: of the 21 (the vendor path's 23 less Flatten's two),
//       every one is written by a hand-written kernel that rounds as it stores
//       (ops::Bf16Rounding), or holds bf16 values already: the outputs of the four convolutions
//       and the two Dense (the GEMM's epilogue, after bias and ReLU: 6), of the two Dropouts (2),
//       and of the three max-pools (copies of their bf16-valued inputs, kernels/ops/maxpool2d.cpp:
//       3); the input gradients of the three max-pools (their backward kernel: 3), of
//       conv2d_2..4 (col2im, before conv2d_2's ReLU mask: 3), of the two Dense (the GEMM's
//       epilogue: 2) and of the two Dropouts (2);
//    6  narrowings of Dense's operands, as above;
//   12  narrowings of a Conv2D's operands, each once for the two passes that read it: x and w
//       (8: ops::conv2d_operand, conv2d_weights), and dy (4: conv2d_operand; conv2d_1's for its
//       backward-filter alone).
// 18 in all (47 before the kernels rounded what they write and each weighted layer made its
// operands' GEMM forms once, the same bits; 57 before that).
constexpr int64_t kBudgetBf16HandwrittenLaunches = 0 + 6 + 12;

TEST_CASE("bf16 on the hand-written path: 18 launches more than fp32 at any batch, no library "
          "call") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: nothing to count");
    return;
  }
  testing::Deadline deadline("a bf16 step's calls, hand-written", std::chrono::seconds(300));
  const BudgetBf16Steps steps = budget_bf16_steps("handwritten");
  const bench::CallCountRow &fp32 = steps.fp32, &bf16 = steps.bf16, &bf16_wider = steps.bf16_wider;
  CAPTURE(fp32.kernel_launches);
  CAPTURE(bf16.kernel_launches);
  CHECK(fp32.library_calls == 0);
  CHECK(bf16.library_calls == 0);
  CHECK(bf16.kernel_launches == fp32.kernel_launches + kBudgetBf16HandwrittenLaunches);
  CHECK(bf16_wider.kernel_launches == bf16.kernel_launches);
  CHECK(bf16.graph_launches == 0);
  CHECK(bf16.host_blocking_inside == 0);
  CHECK(steps.bf16_graphs.graph_launches == 3);  // with graphs, as on the vendor path
  CHECK(steps.bf16_graphs.kernel_launches + steps.bf16_graphs.library_calls == 0);
}

}  // namespace
}  // namespace brigade::pipeline
#endif

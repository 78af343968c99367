// Tracing (the measured timeline of a step, drawn and compared with the simulator) and
// recomputation (the same parameters, a lower measured peak).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "kernels/cuda/path.h"
#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/svg.h"
#include "pipeline/schedule/trace.h"
#include "pipeline/schedule/validate.h"  // peak_live
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

TEST_CASE("a step's timeline has every action once, in its device's list order") {
  testing::Deadline deadline("trace of 1f1b");
  const Partition partition = at_cuts(8, {2, 6});
  auto model = test::placed_model(partition, 3, 50);
  const Schedule schedule = make_schedule("zb-h1", 3, 4);
  Runtime runtime(*model, test::test_devices(3, 50), partition, schedule, test::sgd,
                  test::runtime_options({.seed = test::kDropoutSeed}));
  const StepResult r = runtime.step(test::random_batch(8, 1), 0);
  const Timeline& t = r.timeline;
  test::check_compute_lane(t, schedule);
  // Send lane: one copy per activation of stages 0, 1 and per input gradient of stages 1, 2;
  // receive lane: as many, on the stages that take them; a flow joins each send to its
  // receive: the same micro-batch, from the next stage's activation or the previous stage's
  // gradient. A receive ends before the compute that uses its tensor starts (same device).
  REQUIRE(t.lanes == std::vector<std::string>{"compute", "send", "recv"});
  const auto on_lane = [&](int lane) {
    return std::count_if(t.events.begin(), t.events.end(),
                         [&](const TimelineEvent& e) { return e.lane == lane; });
  };
  CHECK(on_lane(1) == 2 * 4 + 2 * 4);
  CHECK(on_lane(2) == 2 * 4 + 2 * 4);
  CHECK(t.flows.size() == 2 * 4 + 2 * 4);
  for (const Flow& f : t.flows) {
    const TimelineEvent& send = t.events[f.from];
    const TimelineEvent& recv = t.events[f.to];
    CAPTURE(event_name(t, send));
    CAPTURE(event_name(t, recv));
    REQUIRE(send.lane == 1);
    REQUIRE(recv.lane == 2);
    CHECK(recv.action.microbatch == send.action.microbatch);
    CHECK(recv.action.op == send.action.op);  // F: an activation, B: a gradient
    CHECK(recv.action.stage == send.action.stage + (send.action.op == Op::F ? 1 : -1));
    CHECK(recv.device == schedule.device_of(recv.action.stage));
    CHECK(recv.end >= recv.start);
    // Clocks of two devices are compared only on CPU devices (one host clock).
    if (!test::on_cuda()) CHECK(recv.end >= send.start);
    for (const TimelineEvent& e : t.events)
      if (e.lane == 0 && e.device == recv.device && e.action.stage == recv.action.stage &&
          e.action.microbatch == recv.action.microbatch &&
          (e.action.op == Op::F) == (recv.action.op == Op::F) && e.action.op != Op::W)
        CHECK(e.start >= recv.end);
  }
  // One peak per device (by name): 3 on CPU devices or 3 GPUs, fewer where stages share a GPU.
  const std::vector<Device> placed = test::test_devices(3, 50);  // placed_model's above
  const std::set<Device> distinct(placed.begin(), placed.end());
  CHECK(r.peak_memory.size() == distinct.size());
  for (const Device& device : distinct) CHECK(r.peak_memory.at(device.str()) > 0);

  // The simulator replays the measured durations: per device the same busy time.
  const TraceComparison c = compare_with_simulation(schedule, t);
  CHECK(measured_costs(schedule, t).measured.size() == schedule.total_actions());
  for (int d = 0; d < 3; ++d)
    CHECK(c.simulated.stats.devices[d].busy ==
          doctest::Approx(c.measured.devices[d].busy).epsilon(1e-9));
  CHECK(c.measured.bubble_fraction >= 0);
  CHECK(c.measured.bubble_fraction < 1);
  CHECK(format_comparison(c).find("bubble") != std::string::npos);

  // The same pictures as the simulator's.
  CHECK(timeline_svg({t}).find("2W3") != std::string::npos);
  CHECK(chrome_trace_json(t).find("\"device 2\"") != std::string::npos);
}

TEST_CASE("a memory budget holds in the measured trace: zb-auto within 2 micro-batches") {
  testing::Deadline deadline("zb-auto within a budget");
  const Partition partition = at_cuts(8, {2, 6});
  auto model = test::placed_model(partition, 3, 60);
  // Uneven costs, so that the planner has reasons to run forwards early; a budget of 2 keeps
  // every device below what 1F1B's device 0 holds (3).
  CostModel costs;
  for (int s = 0; s < 3; ++s) costs.stages.push_back({.f = 1.0 + s, .b = 1.5, .w = 0.5});
  const Schedule schedule = zb_auto(3, 6, costs, 2);
  Runtime runtime(*model, test::test_devices(3, 60), partition, schedule, test::sgd,
                  test::runtime_options({.seed = test::kDropoutSeed}));
  const StepResult r = runtime.step(test::random_batch(12, 2), 0);
  // In flight from the measured start of each F to the measured end of its W or BW.
  for (const DeviceStats& d : measure(r.timeline).devices) CHECK(d.peak_in_flight <= 2);
  CHECK(measure(r.timeline).devices[0].peak_in_flight == 2);  // the budget is used, not missed
  // The lists alone say as much: a device's stream runs its list in order.
  for (int live : peak_live(lower(schedule))) CHECK(live <= 2);
}

TEST_CASE("recomputation: the same parameters, a lower peak of memory") {
  testing::Deadline deadline("recomputation");
  const Partition partition = at_cuts(8, {4});
  const Schedule schedule = make_schedule("gpipe", 2, 8);  // every activation held at once
  // Micro-batches of 32 samples, so that the activations, not the fixed conv workspaces, make
  // the peak: with 8, once the max-pool freed the ReLU output before it (tape.h), stage 0
  // held about as much without recomputation as with it.
  const HostBatch batch = test::random_batch(256, 2);
  std::vector<std::vector<float>> params[2];
  std::vector<uint64_t> peaks[2];  // per device of the run (each run has devices of its own)
  for (int recompute = 0; recompute < 2; ++recompute) {
    auto model = test::placed_model(partition, 2, 60 + 2 * recompute);
    // lockstep: the host does not run ahead of the streams, so a peak is the schedule's, not
    // the machine's timing (see RuntimeOptions::lockstep).
    Runtime runtime(*model, test::test_devices(2, 60 + 2 * recompute), partition, schedule,
                    test::sgd,
                    test::runtime_options({.seed = test::kDropoutSeed,
                                           .recompute = recompute == 1,
                                           .lockstep = true}));
    StepResult r;
    for (uint32_t step = 0; step < 2; ++step) r = runtime.step(batch, step);
    for (const Device& device : runtime.devices())
      peaks[recompute].push_back(r.peak_memory.at(device.str()));
    params[recompute] = test::params_of(*model);
  }
  // The recomputed forward is the same ops on the same inputs with the same dropout masks:
  // the same bits where every kernel is a fixed function of its inputs (CPU devices, the
  // hand-written CUDA kernels). cuBLAS promises bit-wise reproducible results only when the
  // streams issuing its calls do not change (its documentation, "Results reproducibility"), and
  // the two runs issue them from different points of different schedules: within 1e-5 there.
  test::check_close(params[1], params[0],
                    /*exact=*/!test::on_cuda() || cuda_path() == CudaPath::handwritten);
  // Stage 0 (two convolutions) keeps one (8, 1, 8, 8) input per micro-batch instead of its
  // activations; stage 1 keeps its (8, 4, 4, 4) input instead of pooling masks and dense outputs.
  CHECK(peaks[1][0] < peaks[0][0]);
  CHECK(peaks[1][1] < peaks[0][1]);
}

}  // namespace
}  // namespace brigade::pipeline

// Synchronous semantics, the invariant of the whole project: a pipelined step on any schedule
// gives the parameters of the same training on one device with the same micro-batches
// accumulated in order — with dropout on, over several steps.
//
// Bit-exact or not: every op of a micro-batch is the same function on the same inputs in both
// runs (same micro-batch sizes, same dropout masks, one compute thread per device), so the
// only difference can be the ORDER in which a stage adds the micro-batches' weight gradients
// into .grad. Every generator runs each stage's W (or BW) in micro-batch order 0, 1, ..., m-1
// — as the reference does — so on CPU devices every schedule must give the same bits, with no
// exception. Lists written in another order (a schedule file whose backward goes m-1, ..., 0,
// as the GPipe paper draws it) add the same gradients in another order: float addition is
// not associative, so they agree within 1e-5 relative, and no closer is promised.
//
// On GPUs (BRIGADE_TEST_DEVICES=cuda or cuda:all, runtime_model.h) the reference trains on
// cuda:0 and every comparison is within 1e-5: cuBLAS and cuDNN choose their algorithms per
// call, and some of those reduce with atomics, so bit-exactness is claimed on CPU devices only.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "kernels/precision.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/validate.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 12;

std::vector<HostBatch> batches() { return test::random_batches(kSteps, kBatch, 100); }

TEST_CASE("every schedule on 1-4 devices trains like one device") {
  testing::Deadline deadline("runtime parity matrix", std::chrono::seconds(600));
  const auto data = batches();
  const int layers = static_cast<int>(test::small_spec().layers.size());
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 4; ++p) {
      const int v = default_chunks(name);
      if (p * v > layers) continue;
      std::set<int> ms = {1, p - 1, p, 2 * p + 1};
      for (int m : ms) {
        if (m < 1) continue;
        if (name == "interleaved-1f1b" && m % p != 0) continue;  // Megatron's rule: m a multiple of p
        if (name == "dualpipe-v" && m < 2 * p) continue;         // DualPipeV's: m >= 2p
        // zb-auto plans for uneven stage costs (later stages dearer, W cheaper than B, a
        // fused backward cheaper than its halves), so its lists mix split and fused backwards.
        CostModel uneven;
        for (int s = 0; s < p; ++s)
          uneven.stages.push_back({.f = 1.0 + s, .b = 1.0 + s, .w = 0.5 + 0.7 * s,
                                   .bw = 0.9 * (1.5 + 1.7 * s)});
        const Schedule schedule = make_schedule(name, p, m, v, uneven);
        CAPTURE(name);
        CAPTURE(p);
        CAPTURE(m);
        REQUIRE(test::accumulates_in_order(schedule));  // so bit for bit on CPU devices
        // Several chunks: the cut that evens out the devices' totals, placed as the schedule
        // places its stages (looped, or a V).
        const Partition partition = balance(layer_costs(shapes, CostKind::flops),
                                            schedule.stages(), p, schedule.placement);
        auto model = test::placed_model(partition, p, /*first_device=*/1, schedule.placement);
        Runtime runtime(*model, test::test_devices(p, 1), partition, schedule, test::sgd,
                        test::runtime_options({.seed = test::kDropoutSeed}));
        for (int step = 0; step < kSteps; ++step)
          runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step));
        auto reference = test::train_on_one_device(data, m, test::reference_device());
        test::check_close(test::params_of(*model), test::params_of(*reference),
                          /*exact=*/!test::on_cuda());
      }
    }
  }
}

// Precision bf16 (kernels/precision.h): the same invariant, bit for bit, parameters and
// losses. Every layer's output and input gradient is a bf16 value (layers/bf16_boundary.h), so
// the tensors that cross between devices, in bf16 storage, arrive exactly as one device would
// have used them; and every op is still the same function on the same inputs on any device
// and thread count (the bf16 kernels' sums are cut from the shape alone). Were a boundary left
// in float (a Dropout's scaled output, a bias gradient's sum of the incoming gradient), the
// crossing would round what one device keeps, and these bits would differ. On GPUs too, bit
// for bit, on either path: the hand-written kernels sum in a fixed order, with no atomics, and
// cuBLAS's bf16 GEMM and cuDNN's deterministic algorithms give the same bits for the same
// inputs on the same GPU (kernels/precision.h).
TEST_CASE("precision bf16: 1f1b, zb-h1, gpipe and interleaved on 1-3 devices train like one "
          "device") {
  testing::Deadline deadline("bf16 parity", std::chrono::seconds(300));
  const auto data = batches();
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  struct Bf16For {  // the process's precision for this test, fp32 again after it
    Bf16For() { set_precision(Precision::bf16); }
    ~Bf16For() { set_precision(Precision::fp32); }
  };
  // Trains with `schedule` on its devices in bf16; the losses of the steps.
  const auto train = [&](layers::Sequential& model, const Schedule& schedule,
                         const Partition& partition) {
    const Bf16For bf16;
    Runtime runtime(model, test::test_devices(schedule.devices, 1), partition, schedule,
                    test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
    std::vector<double> losses;
    for (int step = 0; step < kSteps; ++step)
      losses.push_back(runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step)).loss);
    return losses;
  };
  for (const std::string name : {"1f1b", "zb-h1", "gpipe", "interleaved-1f1b"})
    for (int p = 1; p <= 3; ++p)
      for (int m : {p, 2 * p + 1}) {
        if (name == "interleaved-1f1b" && m % p != 0) continue;  // m a multiple of p
        CAPTURE(name);
        CAPTURE(p);
        CAPTURE(m);
        const Schedule schedule = make_schedule(name, p, m, default_chunks(name));
        const Partition partition = balance(layer_costs(shapes, CostKind::flops),
                                            schedule.stages(), p, schedule.placement);
        auto model = test::placed_model(partition, p, /*first_device=*/1, schedule.placement);
        const std::vector<double> losses = train(*model, schedule, partition);
        // One device, one stage, the same micro-batches: the parameters and the losses.
        const Schedule alone = make_schedule("gpipe", 1, m);
        const Partition whole = balance(layer_costs(shapes, CostKind::flops), 1);
        auto one = test::placed_model(whole, 1, /*first_device=*/1);
        CHECK(losses == train(*one, alone, whole));
        std::unique_ptr<layers::Sequential> reference;
        {
          const Bf16For bf16;
          reference = test::train_on_one_device(data, m, test::reference_device());
        }
        test::check_close(test::params_of(*model), test::params_of(*reference), /*exact=*/true);
        test::check_close(test::params_of(*one), test::params_of(*reference), /*exact=*/true);
        // And bf16 did compute something else than fp32 would have.
        auto fp32 = test::train_on_one_device(data, m, test::reference_device());
        CHECK(test::params_of(*fp32) != test::params_of(*reference));
      }
}

// GPipe as its paper draws it: the backward last micro-batch first. Not a generator's order
// (gpipe.cpp runs PyTorch's, oldest first), but lists a schedule file may hold.
Schedule gpipe_backward_reversed(int p, int m) {
  Schedule s = make_schedule("gpipe", p, m);
  s.name = "gpipe-lifo";
  for (auto& list : s.lists) std::reverse(list.begin() + m, list.end());
  validate(s);
  return s;
}

TEST_CASE("the test's classifier: in order for 1f1b, zb-h1, gpipe; not for a reversed backward") {
  CHECK(test::accumulates_in_order(make_schedule("1f1b", 3, 5)));
  CHECK(test::accumulates_in_order(make_schedule("zb-h1", 3, 5)));
  CHECK(test::accumulates_in_order(make_schedule("gpipe", 3, 5)));
  CHECK_FALSE(test::accumulates_in_order(gpipe_backward_reversed(3, 5)));
}

TEST_CASE("lists that add weight gradients in another order train like one device within 1e-5") {
  testing::Deadline deadline("reversed backward");
  const auto data = batches();
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const int p = 2, m = 4;
  const Partition partition = balance(layer_costs(shapes, CostKind::flops), p);
  auto model = test::placed_model(partition, p, /*first_device=*/1);
  Runtime runtime(*model, test::test_devices(p, 1), partition, gpipe_backward_reversed(p, m),
                  test::sgd, test::runtime_options({.seed = test::kDropoutSeed}));
  for (int step = 0; step < kSteps; ++step)
    runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step));
  auto reference = test::train_on_one_device(data, m, test::reference_device());
  test::check_close(test::params_of(*model), test::params_of(*reference), /*exact=*/false);
}

TEST_CASE("micro-batch count does not change the training: m = 1 against m = 6 within 1e-5") {
  testing::Deadline deadline("m = 1 against m = 6");
  const auto data = batches();
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const Partition partition = balance(layer_costs(shapes, CostKind::flops), 2);
  auto model = test::placed_model(partition, 2, 1);
  Runtime runtime(*model, test::test_devices(2, 1), partition, make_schedule("1f1b", 2, 6), test::sgd,
                  test::runtime_options({.seed = test::kDropoutSeed}));
  for (int step = 0; step < kSteps; ++step)
    runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step));
  // Dropout masks depend on the sample's place in the mini-batch, not on the cut, so one big
  // micro-batch gives the same update up to float rounding of the sums.
  auto whole = test::train_on_one_device(data, 1, test::reference_device());
  test::check_close(test::params_of(*model), test::params_of(*whole), /*exact=*/false);
}

// Each receive moved ahead of the compute before it, wherever the lists stay free of deadlock:
// lists lower() never writes (a receive issued early, a prefetch), run as they are. The same
// computations in the same order on every stage, so the same bits as one device.
LoweredSchedule with_receives_prefetched(LoweredSchedule l, int* moved) {
  for (auto& list : l.lists)
    for (size_t i = 1; i < list.size(); ++i) {
      const Kind k = list[i].kind;
      if ((k != Kind::RecvF && k != Kind::RecvB) || !is_compute(list[i - 1].kind)) continue;
      std::swap(list[i - 1], list[i]);
      try {
        validate(l);
        ++*moved;
      } catch (const ScheduleError&) {
        std::swap(list[i - 1], list[i]);  // that one would deadlock: keep it where it was
      }
    }
  return l;
}

TEST_CASE("lowered lists with receives issued early train like one device, bit for bit") {
  testing::Deadline deadline("prefetched receives");
  const auto data = batches();
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  for (const char* name : {"1f1b", "zb-h1", "interleaved-1f1b"}) {
    CAPTURE(name);
    const int p = 2, v = std::string(name) == "interleaved-1f1b" ? 2 : 1, m = 4;
    const Schedule schedule = make_schedule(name, p, m, v);
    int moved = 0;
    const LoweredSchedule lists = with_receives_prefetched(lower(schedule), &moved);
    CHECK(moved > 0);
    CHECK(lists.lists != lower(schedule).lists);
    const Partition partition = balance(layer_costs(shapes, CostKind::flops), p * v, p);
    auto model = test::placed_model(partition, p, /*first_device=*/1);
    Runtime runtime(*model, test::test_devices(p, 1), partition, lists, test::sgd,
                    test::runtime_options({.seed = test::kDropoutSeed}));
    CHECK(runtime.lowered().lists == lists.lists);  // run as written, not lowered again
    for (int step = 0; step < kSteps; ++step)
      runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step));
    auto reference = test::train_on_one_device(data, m, test::reference_device());
    test::check_close(test::params_of(*model), test::params_of(*reference), !test::on_cuda());
  }
}

TEST_CASE("clipping by the global gradient norm: every cut gives one device's parameters") {
  testing::Deadline deadline("gradient clipping");
  const auto data = batches();
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const auto one_device = [&](int m, double max_norm) {
    return test::params_of(*test::train_on_one_device(data, m, test::reference_device(), max_norm));
  };
  // 0.05 is below this model's gradient norm at every step: the clipping changes the
  // training. A bound far above it leaves every bit as without clipping (the coefficient 1
  // scales nothing).
  const double kClip = 0.05;
  CHECK(one_device(4, kClip) != one_device(4, 0));
  CHECK(one_device(4, 1e9) == one_device(4, 0));
  for (const auto& name_and_stages : std::vector<std::pair<const char*, int>>{
           {"1f1b", 1}, {"1f1b", 2}, {"zb-h1", 3}, {"gpipe", 2}}) {
    const char* const name = name_and_stages.first;
    const int p = name_and_stages.second;
    CAPTURE(name);
    CAPTURE(p);
    const Schedule schedule = make_schedule(name, p, 4);
    const Partition partition = balance(layer_costs(shapes, CostKind::flops), p);
    auto model = test::placed_model(partition, p, /*first_device=*/1);
    Runtime runtime(*model, test::test_devices(p, 1), partition, schedule, test::sgd,
                    test::runtime_options({.seed = test::kDropoutSeed, .max_grad_norm = kClip}));
    for (int step = 0; step < kSteps; ++step)
      runtime.step(data[static_cast<size_t>(step)], static_cast<uint32_t>(step));
    // Each stage's gradients have the bits of one device's (it accumulates in order), and the
    // norm sums the same per-parameter parts in the same order: the same coefficient.
    REQUIRE(test::accumulates_in_order(schedule));
    test::check_close(test::params_of(*model), one_device(4, kClip), /*exact=*/!test::on_cuda());
  }
}

TEST_CASE("clipping by the global gradient norm is refused for a role with some of the stages") {
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const Partition partition = balance(layer_costs(shapes, CostKind::flops), 2);
  auto model = test::placed_model(partition, 2, 1);
  ProcessRole role;
  role.devices = {0};
  role.links = [](const LinkEnd&) -> std::shared_ptr<Link> { return nullptr; };
  std::string message;
  try {
    Runtime runtime(*model, test::test_devices(2, 1), partition, make_schedule("1f1b", 2, 2),
                    test::sgd,
                    test::runtime_options({.max_grad_norm = 1.0}), role);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("clipping by the global gradient norm needs every stage") != std::string::npos);
}

TEST_CASE("lowered lists that would deadlock are refused before any thread starts") {
  // Device 0 waits for micro-batch 0's gradient before it sends the activation it comes from.
  LoweredSchedule cyclic{"cyclic", 2, 1, 1, 1, Placement::looped, {}};
  cyclic.lists = {{{0, Kind::F, 0}, {0, Kind::RecvB, 0}, {0, Kind::SendF, 0}, {0, Kind::BW, 0}},
                  {{1, Kind::RecvF, 0}, {1, Kind::F, 0}, {1, Kind::BW, 0}, {1, Kind::SendB, 0}}};
  const auto shapes = model::infer_shapes(test::small_spec().input, test::small_spec().layers);
  const Partition partition = balance(layer_costs(shapes, CostKind::flops), 2);
  auto model = test::placed_model(partition, 2, 1);
  const std::vector<float> before = test::params_of(*model).front();
  std::string message;
  try {
    Runtime runtime(*model, test::test_devices(2, 1), partition, cyclic, test::sgd);
  } catch (const ScheduleError& e) {
    message = e.what();
  }
  CHECK(message.find("deadlock: device 0 waits on itself: 0RB0") != std::string::npos);
  CHECK(test::params_of(*model).front() == before);
}

}  // namespace
}  // namespace brigade::pipeline

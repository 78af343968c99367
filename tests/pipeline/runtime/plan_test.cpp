// The pipeline's plan (pipeline/runtime/plan.h): device blocks merged onto fewer devices, cuts
// by cost per stage and per device, the bounds a schedule is held to, how the stages are
// described, and the runtime given the plan's devices.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/validate.h"
#include "tests/pipeline/runtime/runtime_model.h"

namespace brigade::pipeline {
namespace {

model::ModelSpec three_blocks() {
  return model::parse_model(
      "input 8\n"
      "device 0\ndense units=4 activation=relu\n"
      "device 1\ndense units=4 activation=relu\ndense units=4 activation=relu\n"
      "device 2\ndense units=3\n",
      "three.model");
}

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

std::string ranges(const Partition& part) {
  std::ostringstream text;
  for (const StageRange& s : part.stages) text << "[" << s.begin << "," << s.end << ")";
  return text.str();
}

TEST_CASE("plan: the device blocks, merged floor(b * D / K) onto fewer devices") {
  const model::ModelSpec spec = three_blocks();
  PlanRequest r{.devices = cpus(3), .balance = Balance::blocks, .microbatches = 2};
  CHECK(ranges(make_plan(spec, r).cut) == "[0,1)[1,3)[3,4)");
  r.devices = cpus(2);  // blocks 0, 1, 2 -> devices 0, 0, 1
  const Plan two = make_plan(spec, r);
  CHECK(ranges(two.cut) == "[0,3)[3,4)");
  CHECK(two.devices == cpus(2));
  r.devices = {Device::cpu(5)};
  CHECK(ranges(make_plan(spec, r).cut) == "[0,4)");
  r.devices = cpus(4);  // more devices than blocks: a cut by cost, not by blocks
  CHECK_THROWS_WITH(make_plan(spec, r), doctest::Contains("3 device blocks"));
}

TEST_CASE("plan by cost: per stage for one chunk, per device for interleaved chunks") {
  // 1 5 1 1 3 1 on 2 devices. One chunk: [1 5 | 1 1 3 1], 6 each. Two chunks (4 stages on
  // devices 0 1 0 1): the per-stage balance [1|5|1|1 3 1] (no stage above 5) gives device 1
  // 5 + 5 = 10; per device, [1|5|1 1 3|1] gives both 6, the best possible (total 12 / 2).
  const model::ModelSpec spec = model::parse_model(
      "input 8\ndense units=4\ndense units=4\ndense units=4\ndense units=4\ndense units=4\n"
      "dense units=4\n",
      "six.model");
  const std::vector<double> costs = {1, 5, 1, 1, 3, 1};
  PlanRequest r{.devices = cpus(2), .balance = Balance::time, .schedule = "1f1b",
                .microbatches = 2, .layer_times = DeviceCosts(2, costs)};
  CHECK(ranges(make_plan(spec, r).cut) == "[0,2)[2,6)");
  CHECK(largest_device(balance(costs, 4), costs, 2) == 10);
  r.schedule = "interleaved-1f1b";
  r.chunks = 2;
  const Plan interleaved = make_plan(spec, r);
  CHECK(ranges(interleaved.cut) == "[0,1)[1,2)[2,5)[5,6)");
  CHECK(largest_device(interleaved.cut, costs, 2) == 6);
  CHECK(interleaved.lowered.chunks == 2);
  r.devices = cpus(4);  // 8 stages, 6 layers
  r.layer_times = DeviceCosts(4, costs);
  CHECK_THROWS_AS(make_plan(spec, r), PlanError);
}

// A distributed job's list holds a rank's own device and CPU devices standing in for the other
// ranks' (PlanRequest::alike): weighed as alike, by FLOPs, whatever the stand-ins' speeds, so
// that every rank cuts the same. Layers' FLOPs 64, 32, 32, 24: by FLOPs [64 | 88]; with the
// second device ten times slower, [128 | 24].
TEST_CASE("plan: devices weighed as alike are cut by FLOPs, whatever their measured speeds") {
  const model::ModelSpec spec = three_blocks();
  PlanRequest r{.devices = cpus(2), .threads = {4, 1}, .balance = Balance::flops,
                .microbatches = 2, .layer_times = {{1, 1, 1, 1}, {10, 10, 10, 10}}};
  const Plan by_speed = make_plan(spec, r);
  CHECK(by_speed.work_name == "forward FLOPs at each device's speed");
  CHECK(ranges(by_speed.cut) == "[0,3)[3,4)");
  r.alike = true;
  const Plan alike = make_plan(spec, r);
  CHECK(alike.work_name == "forward FLOPs");
  CHECK(ranges(alike.cut) == "[0,1)[1,4)");
  r.alike = false;
  r.threads = {1, 1};  // alike in fact
  CHECK(ranges(make_plan(spec, r).cut) == ranges(alike.cut));
}

TEST_CASE("plan: a schedule holding more than a device's bound is refused; zb-auto plans within") {
  // 1F1B over two devices holds 2 micro-batches on device 0 (its warm-up).
  const model::ModelSpec spec = test::small_spec();
  PlanRequest r{.devices = cpus(2), .balance = Balance::params, .schedule = "1f1b",
                .microbatches = 4, .max_activations = {1, 0}};
  try {
    make_plan(spec, r);
    FAIL("1f1b over its bound was planned");
  } catch (const PlanError& e) {
    CHECK(e.field() == "max_activations");
    CHECK(std::string(e.what()).starts_with(
        "schedule 1f1b holds up to 2 micro-batches' activations on device 0 (cpu:0, bound 1)"));
  }
  r.schedule = "zb-auto";
  const Plan within = make_plan(spec, r);
  CHECK(peak_live(within.lowered)[0] <= 1);
}

TEST_CASE("plan: each stage's cost is written in the criterion of the cut") {
  // Forward FLOPs per sample by hand: dense 2·in·out; relu none. 8 -> 16 -> 16 -> 2.
  const model::ModelSpec spec = model::parse_model(
      "input 8\n"
      "dense units=16 activation=relu\n"  // 2·8·16 = 256 FLOPs,  8·16 + 16 = 144 parameters
      "dense units=16\n"                  // 2·16·16 = 512,      16·16 + 16 = 272
      "relu\n"                            // 0,                   0
      "dense units=2\n",                  // 2·16·2 = 64,        16·2 + 2 = 34
      "three");
  Plan plan;
  plan.devices = cpus(2);
  plan.balance = Balance::params;
  plan.cut = at_cuts(4, {2});
  plan.costs = DeviceCosts(2, {144, 272, 0, 34});
  CHECK(describe_stages(plan, spec) ==
        "\n  stage 0 on cpu:0: dense_1 .. dense_2 (2 layers), 416 parameters (92.4 %)"
        "\n  stage 1 on cpu:1: relu_1 .. dense_3 (2 layers), 34 parameters (7.6 %)");
  plan.balance = Balance::flops;
  plan.costs = DeviceCosts(2, {256, 512, 0, 64});
  CHECK(describe_stages(plan, spec).find(
            "stage 1 on cpu:1: relu_1 .. dense_3 (2 layers), 0.0 MFLOP/sample forward (7.7 %)") !=
        std::string::npos);
  CHECK(format_cost(Balance::time, 3.14159) == "3.14 ms measured");
  CHECK(format_cost(Balance::memory, 2048) == "2.0 KiB/sample of activations");
  CHECK(format_cost(Balance::params, 1234567) == "1,234,567 parameters");
  CHECK(parse_balance("memory") == Balance::memory);
  CHECK_THROWS_AS(parse_balance("speed"), std::invalid_argument);
}

TEST_CASE("plan: the runtime runs on the plan's devices, and refuses a model built elsewhere") {
  if (test::on_cuda()) return;  // names CPU devices
  const model::ModelSpec spec = test::small_spec();
  PlanRequest r{.devices = {Device::cpu(90), Device::cpu(91)}, .balance = Balance::params,
                .schedule = "1f1b", .microbatches = 2};
  const Plan plan = make_plan(spec, r);
  auto model = build_model(spec, plan, test::kModelSeed);
  const Runtime runtime(*model, plan.devices, plan.cut, plan.lowered, test::sgd);
  CHECK(runtime.devices() == plan.devices);
  // The same model given other devices: its layers are not where the runtime would run them.
  CHECK_THROWS_WITH(Runtime(*model, {Device::cpu(92), Device::cpu(93)}, plan.cut, plan.lowered,
                            test::sgd),
                    doctest::Contains("lives on cpu:90 but the schedule runs stage 0 on device "
                                      "0 = cpu:92"));
  CHECK_THROWS_WITH(Runtime(*model, {Device::cpu(90)}, plan.cut, plan.lowered, test::sgd),
                    doctest::Contains("1 devices for schedule '1f1b' of 2 devices"));
}

}  // namespace
}  // namespace brigade::pipeline

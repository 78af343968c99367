// Plan: a pipeline decided before anything runs — its devices, the cut of the model into
// stages, the device of each stage, every device's list of work (lowered, with its transfers)
// and what each layer costs on each device. brigade-train, brigade-bench-pipeline and the tests
// make their pipelines here, from a model and a PlanRequest:
//
//   devices   pipeline device d runs on devices[d]; their thread counts say which run alike
//   balance   what the cut weighs: the model's device blocks (merged onto fewer devices), or
//             each layer's forward FLOPs, parameters, activation bytes or measured time
//   schedule  a generator's name, or lowered lists as written (a schedule file)
//   bounds    the micro-batches each device may hold at once: zb-auto plans within them, and
//             any other schedule is refused if it holds more
//
// Devices of different speeds (thread counts that differ, a GPU beside a CPU) are profiled
// (profile.h), and each stage is weighed on the device that runs it: a faster device is given
// more. The Runtime runs a plan: build_model() puts each stage's layers on its device, and
// Runtime(model, plan.devices, plan.cut, plan.lowered, ...) checks that they are there.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/device.h"
#include "layers/model/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

// What the cut weighs each layer by. blocks: the model's own device blocks (the FLOPs are
// shown beside them); flops: forward FLOPs per sample; params: parameters; memory: activation
// bytes per sample; time: milliseconds measured (a forward and backward of one micro-batch).
enum class Balance { blocks, flops, params, memory, time };
const char* balance_name(Balance balance);           // "blocks", "flops", ...
Balance parse_balance(std::string_view text);       // throws std::invalid_argument

struct PlanRequest {
  std::vector<Device> devices = {};  // [device]: pipeline device d runs on devices[d]
  std::vector<int> threads = {};  // [device]: a CPU device's compute threads, 0 for a GPU
                                  // (empty: all alike)
  Balance balance = Balance::blocks;
  std::string schedule = "1f1b";           // a generator's name (schedule/generators)
  std::optional<LoweredSchedule> lowered = {};  // or lists as written, run as they are
  int chunks = 1;                          // stages per device
  int microbatches = 1;
  std::vector<int> max_activations = {};  // [device]: micro-batches held at once; 0, empty: none
  // Each layer's measured ms on each device ([device][layer], profile_devices), when the caller
  // has it; else profiled here where the plan needs it, on micro-batches of `profile_rows`
  // zeros, the model built from `seed`.
  DeviceCosts layer_times = {};
  int64_t profile_rows = 1;
  uint64_t seed = 0;
  // The stages' costs a schedule that needs them (ScheduleKind::needs_costs: zb-h1, zb-h2,
  // zb-auto) is planned with, when measured; else each stage's forward work, each half of the
  // backward costing about a forward.
  std::optional<CostModel> stage_costs = {};
  // The devices are alike whatever `devices` says: in a distributed job each rank runs one
  // device of the job's one kind, and CPU devices stand in for the other ranks' (so that their
  // stages' blocks stay in host memory, never used). Weighed as alike, every rank cuts the
  // model the same way, and none times a stand-in.
  bool alike = false;
};

// A request the plan cannot serve (a bound a schedule exceeds, more stages than layers), in
// the request's terms; `field` names the request's member, for a tool to name its flag.
class PlanError : public std::invalid_argument {
 public:
  PlanError(const std::string& field, const std::string& message)
      : std::invalid_argument(message), field_(field) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

struct Plan {
  std::vector<Device> devices;  // [device]
  Balance balance = Balance::blocks;
  int chunks = 1;
  Partition cut;                        // stage s = layers cut.stages[s]
  Placement placement = Placement::looped;  // stage -> device (schedule.h)
  LoweredSchedule lowered;              // what the runtime runs
  Schedule schedule;                    // its compute instructions
  DeviceCosts costs;  // [device][layer]: the criterion the stages are described in
  DeviceCosts work;   // [device][layer]: each layer's work on each device (forward FLOPs, at
                      // the device's speed where speeds differ, or measured ms)
  std::string work_name;  // "forward FLOPs", "measured time", "forward FLOPs at each device's speed"

  int stages() const { return cut.count(); }
  int device_of(int stage) const {
    return stage_device(stage, static_cast<int>(devices.size()), placement);
  }
};

// The stages of `devices` x `chunks` over a model of `layers`. Throws PlanError ("chunks") when
// the model has fewer layers than stages.
int stage_count(size_t layers, int devices, int chunks);

// Whether the devices run alike: all CPU devices with one thread count, or all GPUs.
bool run_alike(const std::vector<Device>& devices, const std::vector<int>& threads);

// The plan of `request` for `spec`. Throws PlanError for what the request asks that cannot be
// served, std::invalid_argument from a schedule's generator (naming the values it takes).
Plan make_plan(const model::ModelSpec& spec, const PlanRequest& request);

// The model built for the plan: each stage's layers on its device, parameters from `seed`.
std::unique_ptr<layers::Sequential> build_model(const model::ModelSpec& spec, const Plan& plan,
                                                uint64_t seed);

// How a sum of the plan's criterion reads: "416 parameters", "2.0 KiB/sample of activations",
// "3.14 ms measured", "0.8 MFLOP/sample forward" (blocks and flops).
std::string format_cost(Balance balance, double cost);
std::string format_percent(double part, double total);  // "41.7 %"; "0.0 %" of nothing
// One line per stage, each weighed on its device in the criterion of the cut:
//   "\n  stage 1 on cpu:1: maxpool2d_3 .. dense_2 (6 layers), 222,010 parameters (79.6 %)"
// `names`: what to call each device ("rank 1" in a distributed job); empty: its own name.
std::string describe_stages(const Plan& plan, const model::ModelSpec& spec,
                            const std::vector<std::string>& names = {});
// Device d of the plan as the messages name it: names[d] when given, else the device's name.
std::string device_name(const Plan& plan, const std::vector<std::string>& names, size_t d);

// A device with under `min_share` of the plan's work (Plan::work) idles, and a step takes as
// long as the busiest device's share. What a better cut gives: over these devices, or over the
// first `devices` of them when no cut over more gives every device its share (1 when none).
struct Imbalance {
  size_t lightest = 0, heaviest = 0;  // devices
  std::vector<double> totals;         // [device]: the work under the plan's cut
  size_t devices = 0;                 // the devices of the better cut
  std::vector<double> balanced;       // [device]: the work under it
};
std::optional<Imbalance> find_imbalance(const Plan& plan, size_t layers, double min_share);

}  // namespace brigade::pipeline

// Partition: a Sequential's layers cut into contiguous stages, one range of layers per stage.
//
// Three ways to cut:
//   from_device_blocks(spec)  the question's placement: `device K` blocks / DeviceScopes,
//                             block K is stage K (blocks must be contiguous);
//   at_cuts(layers, cuts)     explicit cut points: cuts = the first layer of stages 1, 2, ...;
//   balance(costs, stages)    the contiguous cut minimising the largest stage's cost, found
//                             exactly by dynamic programming over (layers, stages);
//   balance(costs, stages, p, placement)  the same for schedules of several chunks per
//                             device (looped: device d runs stages d, d+p, ...; v-shape: d
//                             and 2p-1-d, ...): minimises the largest DEVICE total, exactly;
//                             with a cost row per device, for devices of different speeds.
// Costs per layer come from the model's shapes (parameters, activation bytes, FLOPs:
// layer_costs) or from measuring each layer's forward + backward (profile.h); the cut itself
// never runs the model.
//
// A model must be BUILT for its partition: a module's parameters live on one device.
// layer_devices() says which device each layer lives on when stage s runs on its device (the
// schedule's placement, pipeline/schedule/schedule.h), for Sequential::placed to build (plan.h's
// build_model); the Runtime is given the devices and checks the model against them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>
#include "engine/device.h"
#include "layers/model/model_file.h"
#include "pipeline/schedule/schedule.h"  // Placement

namespace brigade::pipeline {

struct StageRange {
  size_t begin = 0, end = 0;  // layers [begin, end)
  size_t size() const { return end - begin; }
};

struct Partition {
  std::vector<StageRange> stages;
  int count() const { return static_cast<int>(stages.size()); }
};

// Stage K = device block K. Throws brigade::Error when a block's layers are not contiguous.
Partition from_device_blocks(const model::ModelSpec& spec);

// cuts: strictly increasing, each in [1, layers - 1]. Throws naming the bad cut.
Partition at_cuts(size_t layers, const std::vector<size_t>& cuts);

// The exact min-max contiguous cut of `costs` (one per layer, >= 0) into `stages` non-empty
// stages. Among equally good cuts, the one with the earliest cuts. Throws when
// stages > layers or stages < 1.
Partition balance(const std::vector<double>& costs, int stages);

// Several chunks per device (pipeline/schedule/schedule.h's placements): what a device costs is
// the SUM of its stages, and evening out stages does not even out devices (on 2 looped devices
// with v = 2, the balanced stages of a front-heavy model put two heavy stages on device 0).
// This is the contiguous cut into `stages` stages minimising the largest device total, exact:
// a depth-first search over cut positions in the spirit of branch and bound (see
// partition.cpp for why its pruning never discards an optimum). With devices == stages it is
// balance(costs, stages). Ties: balance(costs, stages)'s cut when that one is optimal.
// Throws as balance does, and when devices < 1 or stages is not a multiple of devices.
Partition balance(const std::vector<double>& costs, int stages, int devices,
                  Placement placement = Placement::looped);

// What each layer costs on each device, costs[d][i], one row per device, one cost per layer
// (>= 0) in each: devices of different speeds — CPU devices with different thread counts, a
// GPU beside a CPU — weigh the same layer differently. balance() then weighs each stage on
// the device it is placed on and minimises the largest device total, exactly (the dynamic
// programme with one stage per device, the search otherwise); identical rows give the cut of
// the one-row balance above.
using DeviceCosts = std::vector<std::vector<double>>;
Partition balance(const DeviceCosts& costs, int stages, Placement placement = Placement::looped);
double largest_device(const Partition& partition, const DeviceCosts& costs,
                      Placement placement = Placement::looped);
// Each device's total under `partition`, its stages placed by `placement` and each weighed on
// its own device: [device], one per row of `costs`.
std::vector<double> device_totals(const Partition& partition, const DeviceCosts& costs,
                                  Placement placement = Placement::looped);
// The largest device total of `partition` with its stages placed on `devices` by `placement`.
double largest_device(const Partition& partition, const std::vector<double>& costs, int devices,
                      Placement placement = Placement::looped);

// What a layer's cost counts: parameters, activation bytes or FLOPs per sample.
enum class CostKind { params, activations, flops };
// One cost per layer from the model's inferred shapes.
std::vector<double> layer_costs(const model::ModelShapes& shapes, CostKind kind);

// [layer]: the device each layer lives on, stage s's layers on
// devices[stage_device(s, devices.size(), placement)]. Throws when `devices` is empty.
std::vector<Device> layer_devices(const Partition& partition, const std::vector<Device>& devices,
                                  Placement placement = Placement::looped);

// One line per stage: "stage 1 (device 1): conv2d_3 maxpool2d_2 ...  cost 12.5 (41.7 %)".
std::string format_partition(const Partition& partition, const model::ModelSpec& spec,
                             const std::vector<double>& costs, int devices,
                             Placement placement = Placement::looped);

}  // namespace brigade::pipeline

// Where the model runs: --devices resolved against the machine and the model's device blocks.
//
//   auto        every GPU if there is one; else one CPU device per `device` block of the
//               model (the question's network has 3), all sharing the machine's cores;
//   LIST        "cpu:0,cpu:1,cpu:2" or "cuda:0,cuda:1", each checked (a cuda:N this machine
//               does not have is refused, never replaced by a CPU device).
//
// Stage s runs on devices[s]. With fewer devices than blocks, neighbouring blocks merge:
// block b goes to device floor(b·D / K) (K blocks, D devices), so every device gets a
// contiguous run of blocks and the runs differ by at most one block. One device is plain
// training. More devices than blocks is refused unless --balance cuts the model anew by cost
// (then `stages` below is only the block view, and the runtime's partition decides: by cost,
// cut_by_cost below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "layers/model_file.h"
#include "pipeline/partition.h"
#include "tools/train/options.h"

namespace brigade::train {

struct Stage {
  Device device;
  size_t begin = 0, end = 0;  // the layers [begin, end) of the model
};

struct Placement {
  std::vector<Device> devices;        // --devices resolved, one per pipeline device
  std::vector<Device> block_devices;  // block K of the model -> its device
  std::vector<Stage> stages;          // one per device, in model order
  int threads_per_device = 1;         // of each CPU device
};

// The devices of `list` ("auto" or a comma-separated list). Throws UsageError or
// brigade::Error (an unavailable CUDA device).
std::vector<Device> resolve_devices(const std::string& list, int model_blocks);

// Resolves the devices, maps blocks to them and configures every CPU device (threads and
// --device-memory). Throws UsageError for impossible combinations.
Placement place(const Options& options, const model::ModelSpec& model);

// --balance params|memory|time: the model cut into devices x chunks stages by per-layer cost,
// stage s on device s mod devices. One chunk per device: the exact per-stage balance. More
// (interleaved schedules): the exact per-DEVICE balance, since a device runs the sum of its
// chunks and evening out stages does not even out devices. Throws as pipeline::balance does.
pipeline::Partition cut_by_cost(const std::vector<double>& layer_costs, int devices, int chunks);

// "cpu:0 [conv2d_1 .. maxpool2d_1], cpu:1 [...]"
std::string describe(const Placement& placement, const model::ModelSpec& model);

}  // namespace brigade::train

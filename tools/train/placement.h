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
#include "pipeline/runtime/partition.h"
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
  std::vector<int> threads;           // [device]: a CPU device's compute threads; 0 for a GPU

  // Whether the devices run alike: all CPU devices with one thread count, or all GPUs. Devices
  // of different speeds are profiled, and the model is cut and scheduled for their speeds.
  bool uniform() const;
  // "1 thread per CPU device", "threads per CPU device: 2, 1".
  std::string describe_threads() const;
};

// The devices of `list` ("auto" or a comma-separated list). Throws UsageError or
// brigade::Error (an unavailable CUDA device).
std::vector<Device> resolve_devices(const std::string& list, int model_blocks);

// A flag that takes one count for every device or one per device of --devices (e.g. 2,1):
// each device's count, 0 where none was given. Throws UsageError for another number of counts.
std::vector<int> per_device(const std::vector<int>& counts, const std::string& flag,
                            const Options& options, size_t devices);

// Resolves the devices, maps blocks to them and configures every CPU device (threads and
// --device-memory). Throws UsageError for impossible combinations.
Placement place(const Options& options, const model::ModelSpec& model);

// --balance params|memory|time: the model cut into devices x chunks stages by per-layer cost,
// the stages placed as the schedule places them (looped: stage s on device s mod devices; or a
// V). One chunk per device: the exact per-stage balance. More: the exact per-DEVICE balance,
// since a device runs the sum of its chunks and evening out stages does not even out devices.
// Throws as pipeline::balance does.
pipeline::Partition cut_by_cost(const std::vector<double>& layer_costs, int devices, int chunks,
                                pipeline::Placement placement = pipeline::Placement::looped);
// The same for devices of different speeds: one row of layer costs per device (its own
// measured times, or FLOPs scaled by its measured speed), each stage weighed on its device.
pipeline::Partition cut_by_cost(const pipeline::DeviceCosts& costs, int chunks,
                                pipeline::Placement placement = pipeline::Placement::looped);

// --balance's criterion: what each layer weighs, and how a sum of it reads. blocks and flops
// weigh the forward FLOPs per sample, params the parameters, memory the activation bytes per
// sample, time the milliseconds measured (a forward and backward of one micro-batch).
std::string format_cost(const std::string& balance, double cost);

// One line per stage, in the criterion the cut was made by:
//   "  stage 1 on cpu:1: maxpool2d_3 .. dense_2 (6 layers), 222,010 parameters (79.6 %)"
std::string describe_stages(const pipeline::Partition& partition, const model::ModelSpec& model,
                            const std::vector<Device>& devices, const std::string& balance,
                            const std::vector<double>& costs,
                            pipeline::Placement placement = pipeline::Placement::looped);
// Each stage's cost on its own device (devices of different speeds).
std::string describe_stages(const pipeline::Partition& partition, const model::ModelSpec& model,
                            const std::vector<Device>& devices, const std::string& balance,
                            const pipeline::DeviceCosts& costs,
                            pipeline::Placement placement = pipeline::Placement::looped);

// A device under this share of the work is all but idle, and the others wait for it.
inline constexpr double kMinDeviceShare = 0.05;

// Over 2+ devices, the warning when a device has under kMinDeviceShare of the work (`work`:
// per layer, the forward FLOPs, or the measured times with --balance time), with the command
// that balances it: `command` (the words of this run) with --balance flops, whose shares it
// states, or with fewer devices when no cut over these gives every device its share. Empty
// when the cut is balanced enough.
std::string imbalance_warning(const pipeline::Partition& partition, const model::ModelSpec& model,
                              const std::vector<Device>& devices, int chunks,
                              const std::vector<double>& work, const std::string& work_name,
                              const std::vector<std::string>& command,
                              pipeline::Placement placement = pipeline::Placement::looped);
// The same with the work of each layer on each device (devices of different speeds).
std::string imbalance_warning(const pipeline::Partition& partition, const model::ModelSpec& model,
                              const std::vector<Device>& devices, int chunks,
                              const pipeline::DeviceCosts& work, const std::string& work_name,
                              const std::vector<std::string>& command,
                              pipeline::Placement placement = pipeline::Placement::looped);

// For CPU devices of different speeds, the warning when their compute threads together are
// more than the machine's `hardware_threads`: they then take turns on the same cores, each
// slowing the others, and the cut made for their speeds (each profiled while the others
// rest) can be slower than an even one (docs/benchmarks.md measures it). Empty otherwise.
std::string shared_cores_warning(const Placement& placement, int hardware_threads);

// `command` with `flag VALUE` set: an earlier `flag X` or `flag=X` replaced, else appended.
std::vector<std::string> with_option(std::vector<std::string> command, const std::string& flag,
                                     const std::string& value);

}  // namespace brigade::train

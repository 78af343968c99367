// Where the model runs, and what the run says about the pipeline's plan (pipeline/runtime/
// plan.h: it cuts, places and orders) in the words of its flags. --devices is
//   auto        every GPU if there is one; else one CPU device per `device` block of the
//               model (the question's network has 3), all sharing the machine's cores;
//   LIST        "cpu:0,cpu:1,cpu:2" or "cuda:0,cuda:1", each checked (a cuda:N this machine
//               does not have is refused, never replaced by a CPU device).
// Fewer devices than blocks merge neighbouring blocks; more is refused unless --balance cuts
// the model anew by cost.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"
#include "tools/train/options.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

struct RunDevices {
  std::vector<Device> devices;  // --devices resolved, one per pipeline device
  std::vector<int> threads;     // [device]: a CPU device's compute threads; 0 for a GPU

  // Whether the devices run alike (pipeline::run_alike). Devices of different speeds are
  // profiled, and the model is cut and scheduled for their speeds.
  bool uniform() const { return pipeline::run_alike(devices, threads); }
  // "1 thread per CPU device", "threads per CPU device: 2, 1".
  std::string describe_threads() const;
};

// The devices of `list`: "auto" (every GPU, else a CPU device per device block of the model)
// or a list for Device::parse_list. Throws UsageError naming what is wrong with it.
std::vector<Device> resolve_devices(const std::string& list, int model_blocks);

// --math (kernels/math_mode.h) for this process, after checking every device can compute in
// it: tf32 needs CUDA devices on the vendor path; a CPU device or BRIGADE_CUDA_PATH=handwritten
// is a UsageError naming the device or the path. (choose_devices calls it.)
void use_math_mode(const std::string& math, const std::vector<Device>& devices);

// --precision (kernels/precision.h) for this process: every device has bf16 kernels (CPU
// devices, and GPUs on either CUDA path). (choose_devices calls it.)
void use_precision(const std::string& precision);

// A flag that takes one count for every device or one per device of --devices (e.g. 2,1):
// each device's count, 0 where none was given. Throws UsageError for another number of counts.
std::vector<int> per_device(const std::vector<int>& counts, const std::string& flag,
                            const Options& options, size_t devices);

// Resolves the devices against the model (auto: no more GPUs than the cut can use) and
// configures every CPU device (threads and --device-memory), the math mode (--math) and the
// precision (--precision).
// Throws UsageError for impossible combinations.
RunDevices choose_devices(const Options& options, const model::ModelSpec& model);

// A device under this share of the work is all but idle, and the others wait for it.
inline constexpr double kMinDeviceShare = 0.05;

// Why the run a suggestion's command asks for would be refused before its first step, as the
// end of a sentence ("a step would not fit the devices' memory"), or nothing where it would run.
// It may first amend the suggestion so that it runs: brigade-train weighs it by the checks this
// run passed, and where its step would not fit, gives it the fewest micro-batches with which it
// does (pipeline_build.cpp; memory_check.h, microbatches_that_fit).
using SuggestionRefusal = std::function<std::optional<std::string>(Suggestion&)>;

// Over 2+ devices, the warning when a device has under kMinDeviceShare of the plan's work
// (pipeline::find_imbalance), with the command that balances it: this run's command
// (suggested_command.h, which keeps mpirun and a resumed run's micro-batch count) with
// --balance flops (or time), whose shares it states, or with fewer devices when no cut over
// these gives every device its share. Empty when the cut is balanced enough. `names`: what to
// call each device (describe_stages). Where `refusal` says the command would be refused (fewer
// devices each holding more than its memory), the warning says why in its place: a command
// that would not run is never printed. Where `refusal` gave the command more micro-batches, the
// warning says so before it. Without `refusal`, the command is not weighed.
std::string imbalance_warning(const pipeline::Plan& plan, const model::ModelSpec& model,
                              const Options& options, int microbatches,
                              const std::vector<std::string>& names = {},
                              const SuggestionRefusal& refusal = {});

// For CPU devices of different speeds, the warning when their compute threads together are
// more than the machine's `hardware_threads`: they then take turns on the same cores, each
// slowing the others, and the cut made for their speeds (each profiled while the others
// rest) can be slower than an even one (docs/benchmarks.md measures it). Empty otherwise.
std::string shared_cores_warning(const RunDevices& devices, int hardware_threads);
// The command that follows that warning: this run's (suggested_command.h) with
// --threads-per-device scaled down until the CPU devices' threads fit in `hardware_threads`
// (each keeps at least one, the fastest give up theirs first, so their ratio stays as near
// as whole threads allow).
std::string shared_cores_command(const RunDevices& devices, int hardware_threads,
                                 const Options& options, int microbatches);

}  // namespace brigade::train

// Before the first step: everything the run will write is checked, and every count and size it
// will allocate from is bounded against this machine, so that a mistake costs a second, not a
// run that fails at its end (issue 20). Each check throws UsageError (exit status 2) with the
// flag, the value, the limit and why.
//
//   output files     --save, --save-initial, --trace, --metrics, --plot: not a directory, in
//                    a directory that exists, writable (an existing file) or creatable
//   --checkpoint-dir a directory, or a path under a writable directory (made at the first
//                    checkpoint); never a file
//   space            a checkpoint (parameters and optimizer state) and --save must fit on
//                    their file system now
//   threads          --threads-per-device at most kMaxThreadsPerCore x this machine's
//                    hardware threads
//   memory           one step's activations (each layer's output, scaled by what a probe
//                    step of the model measures per sample; on each device its micro-batches
//                    in flight at the schedule's worst instant) and the parameters with their
//                    gradients and optimizer state must fit a CPU device's --device-memory, a
//                    GPU's memory, and 3/4 of this machine's memory for the CPU devices
//                    together — refused before allocating (an estimate: a run close to the
//                    limit may still fail at run time, naming the device)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "layers/model/layer_spec.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/schedule/schedule.h"
#include "tools/train/options.h"

namespace brigade::train {

// Everything the run will write (--save, --save-initial, --trace, --metrics, --plot,
// --checkpoint-dir), and --init-from not a checkpoint (that is --resume's). Throws UsageError.
void check_outputs(const Options& options);
// Room for a checkpoint (parameters and optimizer state, written beside the previous one
// before the rename) and for --save, on their file systems now. Throws UsageError.
void check_output_space(const Options& options, const model::ModelSpec& spec);

// What one step keeps, before anything is allocated: one micro-batch's activations on each
// stage (the analytic bytes per sample scaled by measured_bytes_per_sample where a CPU device
// trains, times the micro-batch's rows), and each device's parameters with their gradients and
// optimizer state. A stage's device is the placement's (pipeline::stage_device).
struct StepMemory {
  std::vector<double> stage_activation_bytes;  // [stage]: one micro-batch
  std::vector<uint64_t> parameter_bytes;       // [device]
  std::vector<uint64_t> staged_bytes;          // [device]: the staging area's (staging.h) two
                                               // mini-batches: images on the first stage's
                                               // device, labels on the last's
};
StepMemory step_memory(const Options& options, const model::ModelSpec& spec,
                       const std::vector<Device>& devices, const pipeline::Partition& partition,
                       pipeline::Placement placement, int microbatches, int64_t step_rows);

// Refuses a step that cannot fit (check_step_fits): on each device, its micro-batches in
// flight at the schedule's worst instant (the simulator's dry run of the schedule, each stage
// weighing its activations of one micro-batch) beside its parameters. Throws UsageError.
void check_step_memory(const Options& options, const StepMemory& memory,
                       const std::vector<Device>& devices, const pipeline::Schedule& schedule,
                       int64_t step_rows);

// Optimizer tensors per parameter: Adam's two moments, SGD's momentum buffer (if any).
int optimizer_states(const Options& options);

// A file the run will write, named by its flag in messages. Throws UsageError.
void check_output_file(const std::string& flag, const std::string& path);

// --checkpoint-dir. Throws UsageError.
// Without --resume (`resume` false), a directory that already holds a checkpoint is refused:
// the new run's first checkpoint would replace it.
void check_checkpoint_dir(const std::string& dir, bool resume);

// Bytes an unprivileged writer may still write on the file system that holds `path`, or the
// directory it would be created in (its nearest existing ancestor).
uint64_t free_bytes(const std::string& path);

// Throws UsageError when `bytes` (what `what` needs) exceed free_bytes(path).
void check_space(const std::string& flag, const std::string& path, uint64_t bytes,
                 const std::string& what);

// More threads than this many per hardware thread only take turns on the same cores (and each
// is a worker with its own stack): a larger count is a typo, not a setting.
inline constexpr int kMaxThreadsPerCore = 4;
int hardware_threads();  // at least 1
// Throws UsageError for --threads-per-device above kMaxThreadsPerCore x hardware_threads().
void check_threads_per_device(int threads);

// Bytes of float32 one sample keeps alive during a training step, at least: the input, every
// layer's output (kept by the tape for the backward) and the largest of them once more (the
// gradient flowing back through it).
uint64_t activation_bytes_per_sample(const model::ModelShapes& shapes, size_t begin, size_t end);
// Bytes of the parameters of layers [begin, end) with their gradients and `states` optimizer
// tensors each (Adam 2, SGD with momentum 1, without 0).
uint64_t parameter_bytes(const model::ModelShapes& shapes, size_t begin, size_t end, int states);
// Bytes one more sample adds to a training step's peak, measured rather than guessed: the
// whole model on a scratch CPU device, a forward with a tape, the loss and the backward on a
// few rows of zeros and then on more; the slope of the allocator's peak. It counts what the
// analytic activation_bytes_per_sample does not (gradients, saved masks, allocator rounding):
// about 2.5x that for the question's network. 0 when the probe itself would be too large.
uint64_t measured_bytes_per_sample(const model::ModelSpec& spec, uint64_t seed);
// This machine's physical memory.
uint64_t machine_memory_bytes();

// What one step asks of one device at its worst instant.
struct DeviceLoad {
  Device device;
  uint64_t activation_bytes = 0;  // the activations it keeps (its micro-batches in flight)
  uint64_t parameter_bytes = 0;   // its parameters, their gradients, the optimizer state
  uint64_t staged_bytes = 0;      // the staging area's two mini-batches (images or labels)
};

// Refuses a step that cannot fit, before anything is allocated: each device against its
// capacity (--device-memory, a GPU's memory), the loads of every entry naming that device
// summed (stages that share a GPU share its memory), and the CPU devices together against this
// machine's memory. `step_rows`: the samples of one step (for the message).
void check_step_fits(const std::vector<DeviceLoad>& loads, int64_t step_rows, int64_t batch_flag);

}  // namespace brigade::train

// Before the first step: everything the run will write is checked, and every count and size it
// will allocate from is bounded against this machine, so that a mistake costs a second, not a
// run that fails at its end (issue 20). Each check throws UsageError (exit status 2) with the
// flag, the value, the limit and why.
//
//   output files     --save, --save-initial, --trace, --metrics, --plot: not a directory, in
//                    a directory that exists and lets the file be made or replaced (renamed
//                    over; --metrics, grown in place, needs an existing file writable), and
//                    no two naming one file
//   --checkpoint-dir a directory, or a path under a writable directory (made at the first
//                    checkpoint); never a file
//   space            a checkpoint (parameters and optimizer state; two where the run's
//                    second is written beside its first) and --save must fit on their file
//                    system now
//   threads          --threads-per-device at most kMaxThreadsPerCore x this machine's
//                    hardware threads
//   memory           one step's load on each device (pipeline/runtime/step_memory.h) must fit
//                    a CPU device's --device-memory, a GPU's memory, and 3/4 of this
//                    machine's memory for the CPU devices together
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/step_memory.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"

namespace brigade::train {

// Everything the run will write (--save, --save-initial, --trace, --metrics, --plot,
// --checkpoint-dir), and --init-from not a checkpoint (that is --resume's). Throws UsageError.
void check_outputs(const Options& options);
// Room for a checkpoint (parameters and optimizer state, written beside the previous one
// before the rename: two, for a run that saves more than once into a directory without one)
// and for --save and --save-initial, on their file systems now: each file's size as it will be
// written (its header too), not a margin. Throws UsageError.
void check_output_space(const Options& options, const model::ModelSpec& spec, const Recipe& recipe);

// The names of the optimizer's state tensors start with these, one tensor per parameter each:
// Adam's two moments, SGD's momentum buffer (if any). optimizer_states is how many.
std::vector<std::string_view> optimizer_state_prefixes(const Options& options);
int optimizer_states(const Options& options);

// How a file is written (engine/output_file.h): `replaced`, whole, to a temporary beside it
// renamed over it (WholeFile: its directory must allow that, whatever the old file allows);
// `in_place`, grown by appends (GrowingFile, --metrics: an existing file must be writable).
// A device or a pipe is written in place either way.
enum class Writing { replaced, in_place };

// A file the run will write, named by its flag in messages. Throws UsageError.
void check_output_file(const std::string& flag, const std::string& path,
                       Writing writing = Writing::replaced);

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

// Why a step of these loads (pipeline::step_loads) cannot fit, or nothing: each device against
// its capacity (--device-memory, a GPU's memory), the loads of every entry naming that device
// summed (stages that share a GPU share its memory), and the CPU devices together against 3/4
// of this machine's memory. `step_rows`: the samples of one step, `batch_flag`: --batch (for
// the message, which names them, the device and the bytes).
std::optional<std::string> step_refusal(const std::vector<pipeline::DeviceLoad>& loads,
                                        int64_t step_rows, int64_t batch_flag);
// step_refusal's message as a UsageError, with general advice; brigade-train's own refusal
// (memory_check.h) ends with a command that fits instead.
void check_step_fits(const std::vector<pipeline::DeviceLoad>& loads, int64_t step_rows,
                     int64_t batch_flag);
// The loads of entries that name one device summed: one entry per device, in first-seen order.
std::vector<pipeline::DeviceLoad> loads_per_device(const std::vector<pipeline::DeviceLoad>& loads);

}  // namespace brigade::train

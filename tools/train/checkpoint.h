// Checkpoints: everything a run needs to continue exactly where it stopped, in ONE
// safetensors file, DIR/checkpoint.safetensors, written to a temporary file and renamed
// (layers/model/safetensors.h), so a crash mid-write leaves the previous checkpoint intact.
//
//   tensors   every parameter under its own name ("conv2d_1.weight"), then the optimizer's
//             state ("adam.m.conv2d_1.weight", "adam.v.…", or "sgd.momentum.…")
//   metadata  "brigade": the format tag; "model": the model file's canonical text
//             (print_model); "step", "epoch", "batch": where the next step starts; "recipe.*":
//             the settings the data order, the dropout masks and the updates depend on
//             (seed, batch, shuffle, data, optimizer and its hyper-parameters)
//
// Random state: nothing is carried. The order of epoch e is a pure function of (seed, e)
// (tools/data/batches.h) and a dropout mask one of (seed, step, layer, sample, element)
// (layers/module.h), so the seed and the step number ARE the generator state.
//
// Loading refuses, with a message saying what differs and changing nothing: a file that is
// not a valid safetensors file (truncated, corrupt), not a brigade-train checkpoint, another
// model (the first differing line of the two descriptions), another recipe (each differing
// setting), tensors of other names, shapes or dtypes (every mismatch), or a NaN or an Inf.
// Saving refuses a NaN or an Inf too (divergence.h), before writing: the previous file stays.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/optimizers.h"
#include "layers/tape.h"

namespace brigade::train {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the next step starts — what a checkpoint records and --resume continues from: global
// step number, epoch, and batch within the epoch.
struct ResumePoint {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const ResumePoint&) const = default;
};

// The settings a checkpoint must agree on to be resumed exactly, name -> value as text.
using Recipe = std::map<std::string, std::string>;

std::string checkpoint_path(const std::string& dir);  // DIR/checkpoint.safetensors

// Why the file at `path` does not read as a brigade-train checkpoint (it cannot be read, is no
// safetensors file, or its metadata is another program's), or "" when it does: what --resume
// would go on to check against this run (the model, the recipe, the tensors) is not looked at.
std::string not_a_checkpoint(const std::string& path);

// `optimizers`: one per pipeline stage (or one), together covering the parameters.
// Waits for the values (blocking copies to the host) and writes the checkpoint atomically.
// Creates `dir` if needed. Throws CheckpointError naming the file (and, for a NaN or an Inf,
// the tensor), leaving the previous checkpoint as it was.
void save_checkpoint(const std::string& dir, const model::ModelSpec& model, const Recipe& recipe,
                     const ResumePoint& resume_point,
                     const std::vector<layers::Parameter*>& params,
                     const std::vector<layers::Optimizer*>& optimizers);

// Checks the checkpoint in `dir` against this run, then copies parameters and optimizer state
// in and returns where to continue. Throws CheckpointError before changing anything.
ResumePoint load_checkpoint(const std::string& dir, const model::ModelSpec& model,
                            const Recipe& recipe, const std::vector<layers::Parameter*>& params,
                            const std::vector<layers::Optimizer*>& optimizers);

// The micro-batch count of the run that wrote the checkpoint in `dir` (its recipe's), or
// nothing where no checkpoint there says one (none, unreadable, another program's, a count
// that is none): loading it says why.
std::optional<int> checkpoint_microbatches(const std::string& dir);

// Whether `path` is a checkpoint (its metadata says so); false for anything else, a parameter
// file of --save or a file that cannot be read.
bool is_checkpoint_file(const std::string& path);

// The size of the file save_checkpoint writes for `model` and `recipe`, with an optimizer
// whose state is one tensor per parameter per prefix (layers/optimizers.h: SGD's
// kMomentumPrefix, Adam's two): never less, and at most 80 bytes more (the four counters of
// where the run stands are taken at their widest). What the free-space check before step 1
// asks of the file system.
uint64_t checkpoint_file_size(const model::ModelSpec& model, const Recipe& recipe,
                              std::span<const std::string_view> state_prefixes);

// The first line where the two model descriptions differ, as a sentence; empty if equal.
std::string model_difference(const std::string& checkpoint_model, const std::string& run_model);

}  // namespace brigade::train

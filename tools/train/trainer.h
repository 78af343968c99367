// The training run: from the options to a trained model, a report and an exit status.
//
//   setup   model file -> ModelSpec, checked against the data: input 28x28x1, 10 classes
//           (run_inputs.h); --devices -> placement (placement.h); the data sets; the model
//           cut into stages, its schedule and step runner (pipeline_build.h); --init-from,
//           --resume, --save-initial
//   epochs  per epoch, per batch: stage the next batch (staging.h), run the step, report it
//           (progress.h, metrics.h), checkpoint every N steps (checkpoint.h), stop between
//           steps on a signal (signals.h); evaluate at the end of each epoch (evaluate.h);
//           a NaN or Inf loss ends the run, and no file is written with one (divergence.h)
//   report  the last checkpoint, per-device busy time and measured bubble, --trace, --save,
//           --plot, the summary line
//
// --distributed: the same run on every rank, each training in its role (distributed.h); rank 0
// alone prints, evaluates and writes, after gathering the trained stages. The run asks
// `TrainingProcesses` (training_processes.h) whatever depends on that.
#pragma once

#include <stdexcept>

#include "tools/train/options.h"
#include "tools/train/training_processes.h"

namespace brigade::train {

// The run was refused before its first step: a model file, data, checkpoint or device that
// cannot be used, a batch that cannot fit (what() says which). main() exits 2, as for a
// UsageError: the input was wrong and nothing ran.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs the training the options describe. Returns the exit status: 0, or 130/143 after a
// SIGINT/SIGTERM stop. Throws for every error, main() prints one line and exits: UsageError
// or InputError before the first step (2), anything else once it began (1).
// `processes`: this process alone (LoneProcess), or a rank of the mpirun job (MpiRanks).
int run_training(const Options& options, TrainingProcesses& processes);

}  // namespace brigade::train

// The pipeline a run trains through, built from the options before the first step: the
// options as a request for the pipeline's plan (pipeline/runtime/plan.h: the model cut into
// devices x --chunks stages by its device blocks or by --balance, the schedule, or
// --schedule-file's lists as written), the memory check of a step on each device
// (preflight.h), the model built on its devices, the runner of this process's role in its
// steps (TrainingProcesses::make_runner), and what the run says about the cut.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/sequential.h"
#include "pipeline/runtime/plan.h"
#include "tools/train/memory_check.h"
#include "tools/train/options.h"
#include "tools/train/placement.h"
#include "tools/train/runners.h"
#include "tools/train/training_processes.h"

namespace brigade::train {

struct BuiltPipeline {
  pipeline::Plan plan;
  std::unique_ptr<layers::Sequential> model;
  std::unique_ptr<StepRunner> runner;
  std::string placement;  // the stages, their devices and their share of the work
  std::string memory;     // describe_step: each device's step, estimated (empty: a rank's
                          // run, not weighed), and zb-auto's bounds where memory set them
  std::string warning;    // an unbalanced cut and the command that balances it (weighed by
                          // the memory check as this run is), devices sharing cores: lines
                          // for stderr (empty: none)
};

// The micro-batches of a step over `stages` stages: --microbatches, or, not given, 2 x stages
// (1 on one stage, and for naive, which runs the mini-batch uncut as its baseline).
int step_microbatches(const Options& options, int stages);

// What a refusal of a step's `m` micro-batches adds where the user did not give the count: a
// --resume with --microbatches auto took the checkpoint's (Options::microbatches_from_checkpoint),
// and another count would not continue that run. Empty where the count is the run's own.
std::string checkpoint_count_note(const Options& options, int m);

// `m` micro-batches of a step of `batches.first_rows` samples; `processes`: this process alone,
// or a rank of the mpirun job. Throws UsageError for what the options ask that cannot be built.
BuiltPipeline build_pipeline(const Options& options, const model::ModelSpec& spec,
                             const RunDevices& devices, int m, const EpochBatches& batches,
                             TrainingProcesses& processes);

}  // namespace brigade::train

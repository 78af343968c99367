// A --resume that would train nothing: the checkpoint already stands at (or past) the end the
// run asks for, by --epochs or by --steps. The run is refused (exit status 2, like every input
// refused before the first step), naming where the checkpoint stands and the flag to raise,
// rather than reporting "done: 0 steps" as if it had trained.
#pragma once

#include <cstdint>
#include <string>

#include "tools/train/checkpoint.h"

namespace brigade::train {

// Where this run would stop: its --epochs, its --steps (0: no limit), and the batches of an
// epoch. A resume point whose batch is batches_per_epoch has finished that epoch.
struct RunEnd {
  int epochs = 0;
  int64_t steps = 0;
  int64_t batches_per_epoch = 0;
};

// Throws UsageError when no step is left between `from` (read from `checkpoint`) and `end`.
void check_resume_leaves_steps(const ResumePoint& from, const RunEnd& end,
                               const std::string& checkpoint);

}  // namespace brigade::train

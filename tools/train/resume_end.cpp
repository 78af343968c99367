// See resume_end.h.
#include "tools/train/resume_end.h"

#include "tools/train/options.h"

namespace brigade::train {

void check_resume_leaves_steps(const ResumePoint& from, const RunEnd& end,
                               const std::string& checkpoint) {
  // Epochs already complete: a checkpoint written after an epoch's last step, before the
  // run moved to the next epoch, holds batch == batches_per_epoch.
  const int64_t epochs_done = from.epoch + (from.batch >= end.batches_per_epoch ? 1 : 0);
  const std::string where = "--resume: the checkpoint " + checkpoint + " is at step " +
                            std::to_string(from.step) + " (" + std::to_string(epochs_done) +
                            " epoch" + (epochs_done == 1 ? "" : "s") + " complete)";
  if (end.steps > 0 && from.step >= end.steps)
    throw UsageError(where + ", at or past the --steps " + std::to_string(end.steps) +
                     " this run asks for: nothing to train; raise --steps to continue");
  if (epochs_done >= end.epochs)
    throw UsageError(where + ", at or past the end of the --epochs " + std::to_string(end.epochs) +
                     " this run asks for: nothing to train; raise --epochs to continue");
}

}  // namespace brigade::train

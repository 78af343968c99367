#include "tools/train/memory_check.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "tools/train/preflight.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

namespace {

// Whether an epoch of `samples` cut into batches of `batch` gives every batch at least `m`
// rows: the first, and the short last one if any (the trainer refuses a run where it does not).
bool batches_hold(int64_t samples, int64_t batch, int m) {
  const int64_t first = std::min(batch, samples), last = samples % batch;
  return first >= m && (last == 0 || batch >= samples || last >= m);
}

// The rows of a step's largest micro-batch: what its activations are weighed by.
int64_t rows_of(int64_t step_rows, int m) { return (step_rows + m - 1) / m; }

}  // namespace

std::vector<pipeline::DeviceLoad> check_memory(const Options& o, const model::ModelSpec& spec,
                                               const pipeline::PlanRequest& request,
                                               const pipeline::Plan& plan,
                                               const EpochBatches& batches) {
  const int states = optimizer_states(o);
  const auto loads = [&](const pipeline::Plan& p, int64_t rows) {
    return pipeline::step_loads(spec, p, rows, states, o.seed);
  };
  const std::vector<pipeline::DeviceLoad> asked = loads(plan, batches.first_rows);
  const std::optional<std::string> refusal = step_refusal(asked, batches.first_rows, o.batch);
  if (!refusal) return loads_per_device(asked);

  const int m = request.microbatches;
  Suggestion fix;
  fix.pipeline_devices = static_cast<int>(plan.devices.size());
  fix.microbatches = m;
  std::string how;
  // More micro-batches: the same step, each micro-batch in flight smaller (not for a schedule
  // file, whose lists fix the count): the fewest that fit. A count the schedule cannot make
  // (its generator's rule) is skipped; counts that give the same micro-batch rows as one tried
  // are not weighed again.
  // Counts a quarter apart (a batch of the whole data set has thousands), and the most the
  // epoch's batches allow.
  std::vector<int> counts;
  for (int64_t c = m + 1; c <= batches.first_rows; c = std::max(c + 1, c * 5 / 4))
    counts.push_back(static_cast<int>(c));
  for (int64_t c = batches.first_rows; c > m; --c)
    if (batches_hold(batches.samples, o.batch, static_cast<int>(c))) {
      counts.push_back(static_cast<int>(c));
      break;
    }
  int64_t tried_rows = rows_of(batches.first_rows, m);
  for (const int more : counts) {
    if (request.lowered || !fix.flags.empty()) break;
    if (!batches_hold(batches.samples, o.batch, more) ||
        rows_of(batches.first_rows, more) == tried_rows)
      continue;
    tried_rows = rows_of(batches.first_rows, more);
    pipeline::PlanRequest finer = request;
    finer.microbatches = more;
    finer.profile_rows = std::max<int64_t>(1, o.batch / more);
    try {
      if (!step_refusal(loads(pipeline::make_plan(spec, finer), batches.first_rows),
                        batches.first_rows, o.batch)) {
        fix.flags.emplace_back("--microbatches", std::to_string(more));
        fix.microbatches = more;
        how = "with more micro-batches it fits";
      }
    } catch (const std::invalid_argument&) {  // PlanError, or a generator's sizes
    }
  }
  // A smaller batch, cut into the same micro-batches, a fifth less at a time.
  tried_rows = rows_of(batches.first_rows, m);
  for (int64_t smaller = batches.first_rows - 1; fix.flags.empty() && smaller >= m;
       smaller = std::min(smaller - 1, smaller * 4 / 5)) {
    if (!batches_hold(batches.samples, smaller, m) || rows_of(smaller, m) == tried_rows) continue;
    tried_rows = rows_of(smaller, m);
    if (step_refusal(loads(plan, smaller), smaller, smaller)) continue;
    fix.flags.emplace_back("--batch", std::to_string(smaller));
    how = "with a smaller batch it fits";
  }
  if (fix.flags.empty())
    throw UsageError(*refusal + ": no batch or micro-batch count of this run fits (the " +
                     "parameters alone are too large): use more devices or more memory");
  throw UsageError(*refusal + "; " + how + ":\n  " + suggested_command(o, fix));
}

std::string describe_loads(const std::vector<pipeline::DeviceLoad>& loads) {
  std::string text = "memory of a step, estimated:";
  for (size_t i = 0; i < loads.size(); ++i) {
    const pipeline::DeviceLoad& l = loads[i];
    text += (i ? ", " : " ") + l.device.str() + " " +
            format_size(l.activation_bytes + l.parameter_bytes + l.staged_bytes);
  }
  return text;
}

}  // namespace brigade::train

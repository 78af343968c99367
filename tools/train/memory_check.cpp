#include "tools/train/memory_check.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/validate.h"
#include "tools/train/preflight.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

using pipeline::largest_microbatch_rows;

namespace {

// Whether an epoch of `samples` cut into batches of `batch` gives every batch at least `m`
// rows: the first, and the short last one if any (the trainer refuses a run where it does not).
bool batches_hold(int64_t samples, int64_t batch, int m) {
  const int64_t first = std::min(batch, samples), last = samples % batch;
  return first >= m && (last == 0 || batch >= samples || last >= m);
}

bool same_cut(const pipeline::Partition& a, const pipeline::Partition& b) {
  return std::equal(a.stages.begin(), a.stages.end(), b.stages.begin(), b.stages.end(),
                    [](const pipeline::StageRange& x, const pipeline::StageRange& y) {
                      return x.begin == y.begin && x.end == y.end;
                    });
}

// zb-auto within bounds that fit (check_memory's comment, memory_check.h), or nothing where the
// request is not zb-auto's without bounds, or no bound fits. `bytes`: plan's stage_bytes.
std::optional<FittedStep> zb_auto_within_memory(const Options& o, const model::ModelSpec& spec,
                                                const pipeline::PlanRequest& request,
                                                const pipeline::Plan& plan,
                                                const EpochBatches& batches,
                                                const std::vector<uint64_t>& bytes) {
  const bool bounded = std::any_of(request.max_activations.begin(),
                                   request.max_activations.end(), [](int b) { return b > 0; });
  if (request.schedule != "zb-auto" || request.lowered || bounded) return std::nullopt;
  // The plans weighed cut the model as `plan` does: its work, given as their layer times, gives
  // back the same work (plan.cpp's weigh_work: measured ms as they are; FLOPs at each device's
  // speed scale to themselves), so no layer is profiled again.
  pipeline::PlanRequest bounded_request = request;
  bounded_request.layer_times = plan.work;
  const int states = optimizer_states(o);
  const int64_t rows = largest_microbatch_rows(batches.first_rows, request.microbatches);
  const auto fit_within = [&](const std::vector<int>& bounds) -> std::optional<FittedStep> {
    bounded_request.max_activations = bounds;
    try {
      pipeline::Plan bounded_plan = pipeline::make_plan(spec, bounded_request);
      const std::vector<pipeline::DeviceLoad> loads = pipeline::step_loads(
          spec, bounded_plan, batches.first_rows, states,
          same_cut(bounded_plan.cut, plan.cut)
              ? bytes
              : pipeline::stage_bytes(spec, bounded_plan, rows, o.seed));
      if (step_refusal(loads, batches.first_rows, o.batch)) return std::nullopt;
      return FittedStep{loads_per_device(loads), std::move(bounded_plan), bounds};
    } catch (const std::invalid_argument&) {  // a bound the list scheduler cannot plan in
      return std::nullopt;
    }
  };
  // The most micro-batches of its share a device holds in `plan` (a V's chunk is half of one).
  const int chunks = plan.lowered.chunks;
  int most = 0;
  for (int live : pipeline::peak_live(plan.lowered))
    most = std::max(most, (live + chunks - 1) / chunks);
  const size_t devices = plan.devices.size();
  std::optional<FittedStep> fitted;
  for (int b = most - 1; b >= 1 && !fitted; --b)
    fitted = fit_within(std::vector<int>(devices, b));
  if (!fitted) return std::nullopt;
  // One device's bound one more at a time, in device order, until none can be: a bound on one
  // device changes the lists of the others, so a raise that did not fit may fit after another.
  for (bool raised = true; raised;) {
    raised = false;
    for (size_t d = 0; d < devices; ++d) {
      if (fitted->bounds[d] >= most) continue;
      std::vector<int> more = fitted->bounds;
      ++more[d];
      if (std::optional<FittedStep> roomier = fit_within(more)) {
        fitted = std::move(roomier);
        raised = true;
      }
    }
  }
  return fitted;
}

// Why no step of the run fits, for its refusal: the parameters alone (with their gradients
// and optimizer state) where they do not fit a device, else what its smallest step, one sample
// per micro-batch, would hold (activations have a floor: a layer's workspace, one sample in
// flight per stage and schedule slot).
std::string why_nothing_fits(const Options& o, const model::ModelSpec& spec,
                             const pipeline::Plan& plan,
                             const std::vector<pipeline::DeviceLoad>& asked, int64_t step_rows,
                             int m) {
  for (const pipeline::DeviceLoad& l : loads_per_device(asked)) {
    const uint64_t capacity = Allocator::of(l.device).stats().capacity;
    if (capacity != 0 && l.parameter_bytes > capacity)
      return "the parameters alone are too large: " + l.device.str() + " would hold " +
             format_size(l.parameter_bytes) + " of parameters, gradients and optimizer state";
  }
  if (step_rows == m) return "not even one sample per micro-batch, as this step has";
  const std::vector<pipeline::DeviceLoad> smallest = pipeline::step_loads(
      spec, plan, m, optimizer_states(o), pipeline::stage_bytes(spec, plan, 1, o.seed));
  if (const std::optional<std::string> refusal = step_refusal(smallest, m, m))
    return "not even one sample per micro-batch: " + *refusal;
  return "no smaller batch leaves every batch of the epoch one sample per micro-batch";
}

}  // namespace

FittedStep check_memory(const Options& o, const model::ModelSpec& spec,
                        const pipeline::PlanRequest& request, const pipeline::Plan& plan,
                        const EpochBatches& batches) {
  const int states = optimizer_states(o);
  const std::vector<uint64_t> bytes =
      pipeline::stage_bytes(spec, plan,
                            largest_microbatch_rows(batches.first_rows, request.microbatches),
                            o.seed);
  const std::vector<pipeline::DeviceLoad> asked =
      pipeline::step_loads(spec, plan, batches.first_rows, states, bytes);
  const std::optional<std::string> refusal = step_refusal(asked, batches.first_rows, o.batch);
  if (!refusal) return {loads_per_device(asked), std::nullopt, {}};
  if (std::optional<FittedStep> bounded =
          zb_auto_within_memory(o, spec, request, plan, batches, bytes))
    return std::move(*bounded);

  // Whether a step of `step_rows` fits with plan `p` (made from `r`).
  const auto fits = [&](const pipeline::PlanRequest& r, const pipeline::Plan& p,
                        int64_t step_rows) {
    return step_fits(o, spec, r, p, {step_rows, batches.samples});
  };
  // Both ways below change the recipe a checkpoint holds (its batch, its micro-batches), which
  // a --resume must keep: a command with either would be refused as another run's.
  if (o.resume)
    throw UsageError(*refusal + ": a --resume keeps its checkpoint's --batch and micro-batches, " +
                     "so it fits only on more devices or with more memory");
  const int m = request.microbatches;
  Suggestion fix;
  fix.pipeline_devices = static_cast<int>(plan.devices.size());
  fix.microbatches = m;
  std::string how;
  if (const std::optional<int> more = microbatches_that_fit(o, spec, request, batches)) {
    fix.flags.emplace_back("--microbatches", std::to_string(*more));
    fix.microbatches = *more;
    how = "with more micro-batches it fits";
  }
  // A smaller batch, cut into the same micro-batches, a fifth less at a time.
  int64_t tried_rows = largest_microbatch_rows(batches.first_rows, m);
  for (int64_t smaller = batches.first_rows - 1; fix.flags.empty() && smaller >= m;
       smaller = std::min(smaller - 1, smaller * 4 / 5)) {
    if (!batches_hold(batches.samples, smaller, m) ||
        largest_microbatch_rows(smaller, m) == tried_rows)
      continue;
    tried_rows = largest_microbatch_rows(smaller, m);
    if (!fits(request, plan, smaller)) continue;
    fix.flags.emplace_back("--batch", std::to_string(smaller));
    how = "with a smaller batch it fits";
  }
  if (fix.flags.empty())
    throw UsageError(*refusal + ": no batch or micro-batch count of this run fits (" +
                     why_nothing_fits(o, spec, plan, asked, batches.first_rows, m) +
                     "): use more devices or more memory");
  throw UsageError(*refusal + "; " + how + ":\n  " + suggested_command(o, fix));
}

std::optional<int> microbatches_that_fit(const Options& o, const model::ModelSpec& spec,
                                         const pipeline::PlanRequest& request,
                                         const EpochBatches& batches) {
  // A schedule file's lists fix the count; a --resume keeps its checkpoint's.
  if (request.lowered || o.resume) return std::nullopt;
  const int m = request.microbatches;
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
  // A count the schedule cannot make (its generator's rule) is skipped; counts that give the
  // same micro-batch rows as one tried are not weighed again.
  int64_t tried_rows = largest_microbatch_rows(batches.first_rows, m);
  for (const int more : counts) {
    if (!batches_hold(batches.samples, o.batch, more) ||
        largest_microbatch_rows(batches.first_rows, more) == tried_rows)
      continue;
    tried_rows = largest_microbatch_rows(batches.first_rows, more);
    pipeline::PlanRequest finer = request;
    finer.microbatches = more;
    finer.profile_rows = std::max<int64_t>(1, o.batch / more);
    try {
      if (step_fits(o, spec, finer, pipeline::make_plan(spec, finer), batches)) return more;
    } catch (const std::invalid_argument&) {  // PlanError, or a generator's sizes
    }
  }
  return std::nullopt;
}

bool step_fits(const Options& o, const model::ModelSpec& spec,
               const pipeline::PlanRequest& request, const pipeline::Plan& plan,
               const EpochBatches& batches) {
  const std::vector<uint64_t> bytes = pipeline::stage_bytes(
      spec, plan, largest_microbatch_rows(batches.first_rows, request.microbatches), o.seed);
  const std::vector<pipeline::DeviceLoad> loads =
      pipeline::step_loads(spec, plan, batches.first_rows, optimizer_states(o), bytes);
  return !step_refusal(loads, batches.first_rows, o.batch) ||
         zb_auto_within_memory(o, spec, request, plan, batches, bytes).has_value();
}

std::string describe_step(const FittedStep& step) {
  std::string text = "memory of a step, estimated:";
  for (size_t i = 0; i < step.loads.size(); ++i) {
    const pipeline::DeviceLoad& l = step.loads[i];
    text += (i ? ", " : " ") + l.device.str() + " " +
            format_size(l.bytes());
  }
  if (step.bounds.empty()) return text;
  std::string bounds;
  for (int b : step.bounds) bounds += (bounds.empty() ? "" : ",") + std::to_string(b);
  return text + "; zb-auto planned within it: at most " + bounds +
         " micro-batches in flight per device (as --max-activations " + bounds + ")";
}

}  // namespace brigade::train

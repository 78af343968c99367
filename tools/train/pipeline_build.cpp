#include "tools/train/pipeline_build.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/validate.h"
#include "tools/train/memory_check.h"
#include "tools/train/preflight.h"
#include "tools/train/suggested_command.h"

namespace brigade::train {

namespace {

// --schedule-file: the file's lists, compute-only (then lowered) or lowered (then run as they
// are written, transfers where the file puts them), validated — a deadlock is refused, its
// cycle named, before any thread starts. The plan checks them against this run.
pipeline::LoweredSchedule schedule_from_file(const std::string& path) {
  try {
    return pipeline::load_schedule(path);
  } catch (const std::invalid_argument& e) {  // a file that does not read
    throw UsageError(e.what());
  } catch (const pipeline::ScheduleError& e) {  // a file that does not validate
    throw UsageError(e.what());
  }
}

// A schedule file is written for one shape of run: refused, in the flags that set each count
// (under mpirun the devices are its ranks), where this run's differs (before the plan's own
// check, which says it in the plan's words).
void check_schedule_file_shape(const Options& o, const pipeline::LoweredSchedule& file,
                               int devices, int m, bool distributed) {
  if (file.batch_units != 1)
    throw UsageError("--schedule-file " + o.schedule_file + ": batch_units " +
                     std::to_string(file.batch_units) + " (each micro-batch costed as " +
                     std::to_string(file.batch_units) + ", for brigade-simulate); brigade-train "
                     "runs files of batch_units 1");
  if (file.devices == devices && file.chunks == o.chunks && file.microbatches == m) return;
  const auto count = [](int n, const std::string& one) {
    return std::to_string(n) + " " + one + (n == 1 ? "" : one.ends_with("h") ? "es" : "s");
  };
  throw UsageError("--schedule-file " + o.schedule_file + ": written for " +
                   count(file.devices, "device") + ", " + count(file.chunks, "chunk") +
                   " per device and " + count(file.microbatches, "micro-batch") +
                   "; this run has " + count(devices, "device") +
                   (distributed ? " (mpirun's -np)" : " (--devices)") + ", " +
                   count(o.chunks, "chunk") + " (--chunks) and " + count(m, "micro-batch") +
                   " (--microbatches)" +
                   (file.microbatches != m ? checkpoint_count_note(o, m) : std::string()));
}

// The plan's request for a run of `o` on `devices` in `m` micro-batches (a schedule file's
// lists are the caller's to add).
pipeline::PlanRequest plan_request(const Options& o, const RunDevices& devices, int m,
                                   bool distributed) {
  return {.devices = devices.devices,
          .threads = devices.threads,
          .balance = pipeline::parse_balance(o.balance),
          .schedule = o.schedule,
          .chunks = o.chunks,
          .microbatches = m,
          .max_activations =
              per_device(o.max_activations, "--max-activations", o, devices.devices.size()),
          .profile_rows = o.batch / m,
          .seed = o.seed,
          .stage_costs = {},
          .alike = distributed};
}

// Why the run that `fix` (the imbalance warning's command) asks for would be refused before its
// first step, or nothing: its options, its plan and the memory check of its step, as this run's
// were made (`request`, `plan`). Its devices are a prefix of this run's, with their threads, and
// their work this plan's (the cut find_imbalance weighed: nothing is profiled again). Where its
// step would not fit, `fix` is given the fewest micro-batches with which it does, if any: what
// the memory check would tell that command to add.
std::optional<std::string> suggestion_refusal(Suggestion& fix, const Options& o,
                                              const model::ModelSpec& spec,
                                              const RunDevices& devices,
                                              const pipeline::PlanRequest& request,
                                              const pipeline::Plan& plan,
                                              const EpochBatches& batches) {
  const std::optional<Options> suggested = suggested_options(o, fix);
  if (!suggested) return std::nullopt;  // suggested_command says why, in place of the command
  const size_t kept = fix.fewer_devices ? fix.fewer_devices->size() : devices.devices.size();
  const auto first = [kept](const auto& per_device) {
    return std::vector(per_device.begin(), per_device.begin() + static_cast<std::ptrdiff_t>(kept));
  };
  RunDevices on{.devices = first(devices.devices), .threads = first(devices.threads)};
  try {
    const int stages =
        pipeline::stage_count(spec.layers.size(), static_cast<int>(kept), suggested->chunks);
    pipeline::PlanRequest r =
        plan_request(*suggested, on, step_microbatches(*suggested, stages), /*distributed=*/false);
    r.lowered = request.lowered;
    r.layer_times = first(plan.work);
    if (step_fits(*suggested, spec, r, pipeline::make_plan(spec, r), batches)) return std::nullopt;
    const std::optional<int> finer = microbatches_that_fit(*suggested, spec, r, batches);
    if (!finer) return "a step would not fit the devices' memory";
    fix.flags.emplace_back("--microbatches", std::to_string(*finer));
    fix.microbatches = *finer;
    return std::nullopt;
  } catch (const std::exception& e) {  // PlanError, a generator's sizes, a per-device list
    return std::string("that run is refused (") + e.what() + ")";
  }
}

}  // namespace

std::string checkpoint_count_note(const Options& o, int m) {
  if (!o.microbatches_from_checkpoint) return "";
  return " (the " + std::to_string(m) + " micro-batches are the checkpoint's, which --resume " +
         "keeps: another count would not continue that run)";
}

int step_microbatches(const Options& o, int stages) {
  if (o.microbatches > 0) return o.microbatches;
  return stages == 1 || o.schedule == "naive" ? 1 : 2 * stages;
}

BuiltPipeline build_pipeline(const Options& o, const model::ModelSpec& spec,
                             const RunDevices& devices, int m, const EpochBatches& batches,
                             TrainingProcesses& processes) {
  if (o.balance == "blocks" && o.chunks != 1) {
    // A schedule of one stage per device would refuse the chunks next: say both at once.
    const auto& kinds = pipeline::schedule_kinds();
    const auto kind =
        std::find_if(kinds.begin(), kinds.end(),
                     [&](const pipeline::ScheduleKind& k) { return k.name == o.schedule; });
    const bool one_stage = kind != kinds.end() && kind->chunks == pipeline::Chunks::one;
    throw UsageError("--chunks " + std::to_string(o.chunks) +
                     " needs the model cut into devices x chunks stages: add --balance "
                     "flops|params|memory|time" +
                     (one_stage ? " and a schedule of several stages per device (--schedule " +
                                      o.schedule + " places one: e.g. --schedule interleaved-1f1b)"
                                : std::string()));
  }
  pipeline::PlanRequest request = plan_request(o, devices, m, processes.distributed());
  // A schedule file's header says where it places the stages, and the cut follows it.
  if (!o.schedule_file.empty()) {
    request.lowered = schedule_from_file(o.schedule_file);
    check_schedule_file_shape(o, *request.lowered, static_cast<int>(request.devices.size()), m,
                              processes.distributed());
  }
  BuiltPipeline s;
  try {
    s.plan = pipeline::make_plan(spec, request);
  } catch (const pipeline::PlanError& e) {
    const std::string& field = e.field();
    if (field == "lowered") throw UsageError("--schedule-file " + o.schedule_file + ": " + e.what());
    if (field != "max_activations") throw UsageError(e.what());
    std::string asked;
    for (int b : o.max_activations) {
      if (!asked.empty()) asked += ',';
      asked += std::to_string(b);
    }
    throw UsageError("--max-activations " + asked + ": " + e.what());
  } catch (const pipeline::MicrobatchCountError& e) {  // a count the schedule cannot run
    throw UsageError(e.what() + checkpoint_count_note(o, m));
  } catch (const std::invalid_argument& e) {  // a schedule's generator: other sizes
    throw UsageError(e.what());
  }
  // A rank runs one device; the CPU devices standing for the others are never used, so the
  // step's memory is weighed where one process runs them all.
  if (!processes.distributed()) {
    FittedStep step = check_memory(o, spec, request, s.plan, batches);
    if (step.replanned) s.plan = std::move(*step.replanned);  // zb-auto within memory
    s.memory = describe_step(step);
  }
  s.model = pipeline::build_model(spec, s.plan, o.seed);
  s.runner = processes.make_runner(*s.model, s.plan, o);
  // A rank knows only its own device: the placement names the ranks (as the busy lines do).
  std::vector<std::string> names;
  if (processes.distributed())
    for (size_t d = 0; d < s.plan.devices.size(); ++d)
      names.push_back(processes.device_label(d, s.plan.devices[d]));
  s.placement = pipeline::describe_stages(s.plan, spec, names);
  // The command the warning gives must pass the memory check this run passed. A rank weighs
  // no step (above), so under mpirun neither is the command weighed.
  SuggestionRefusal refusal;
  if (!processes.distributed())
    refusal = [&](Suggestion& fix) {
      return suggestion_refusal(fix, o, spec, devices, request, s.plan, batches);
    };
  s.warning = imbalance_warning(s.plan, spec, o, m, names, refusal);
  // Ranks run on machines of their own; one process runs all its CPU devices on this one.
  const std::string shared =
      processes.distributed() ? "" : shared_cores_warning(devices, hardware_threads());
  if (!shared.empty())
    s.warning += (s.warning.empty() ? "" : "\n") + shared + "; as many threads as cores:\n  " +
                 shared_cores_command(devices, hardware_threads(), o, m);
  return s;
}

}  // namespace brigade::train

#include "tools/train/pipeline_build.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/validate.h"
#include "tools/train/memory_check.h"
#include "tools/train/preflight.h"

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

}  // namespace

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
  pipeline::PlanRequest request{
      .devices = devices.devices,
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
      .alike = processes.distributed()};
  // A schedule file's header says where it places the stages, and the cut follows it.
  if (!o.schedule_file.empty()) request.lowered = schedule_from_file(o.schedule_file);
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
  } catch (const std::invalid_argument& e) {  // a schedule's generator: sizes it cannot serve
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
  s.warning = imbalance_warning(s.plan, spec, o, m, names);
  // Ranks run on machines of their own; one process runs all its CPU devices on this one.
  const std::string shared =
      processes.distributed() ? "" : shared_cores_warning(devices, hardware_threads());
  if (!shared.empty())
    s.warning += (s.warning.empty() ? "" : "\n") + shared + "; as many threads as cores:\n  " +
                 shared_cores_command(devices, hardware_threads(), o, m);
  return s;
}

}  // namespace brigade::train

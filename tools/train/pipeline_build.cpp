#include "tools/train/pipeline_build.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <vector>

#include "pipeline/runtime/profile.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/validate.h"
#include "tools/train/preflight.h"

namespace brigade::train {

namespace {

// --balance time: each layer's forward + backward, measured on a micro-batch of zeros on the
// first device, with the whole model there (a copy, thrown away after).
std::vector<double> profile_times(const model::ModelSpec& spec, const Device& device,
                                  int64_t rows, uint64_t seed) {
  model::ModelSpec one = spec;
  for (model::LayerSpec& l : one.layers) l.device = 0;
  one.device_count = 1;
  const auto model = layers::Sequential::from_spec(one, {device}, seed);
  std::vector<int64_t> dims = spec.input;
  dims[0] = rows;  // (rows, C, H, W)
  return pipeline::profile_layer_times(*model, Tensor::zeros(Shape(dims), device));
}

// --schedule-file: the file's lists, compute-only (then lowered) or lowered (then run as they
// are written, transfers where the file puts them), validated — a deadlock is refused, its
// cycle named, before any thread starts — for this run's devices, chunks and micro-batches.
pipeline::LoweredSchedule schedule_from_file(const std::string& path, int devices, int chunks,
                                             int m) {
  pipeline::LoweredSchedule s;
  try {
    s = pipeline::load_schedule(path);
  } catch (const std::invalid_argument& e) {  // a file that does not read
    throw UsageError(e.what());
  } catch (const pipeline::ScheduleError& e) {  // a file that does not validate
    throw UsageError(e.what());
  }
  if (s.devices != devices || s.chunks != chunks || s.microbatches != m || s.batch_units != 1)
    throw UsageError("--schedule-file " + path + ": devices " + std::to_string(s.devices) +
                     ", chunks " + std::to_string(s.chunks) + ", microbatches " +
                     std::to_string(s.microbatches) + ", batch_units " +
                     std::to_string(s.batch_units) + ", but this run has " +
                     std::to_string(devices) + " devices, --chunks " + std::to_string(chunks) +
                     ", --microbatches " + std::to_string(m) + " (batch_units must be 1)");
  return s;
}

// Devices of different speeds (placement.h, Placement::uniform): each layer's forward and
// backward measured on each device (one probe per kind of device and thread count), and for
// --balance flops (and zb-auto's plan) the FLOPs scaled by each device's measured time per
// FLOP, so that rows compare across devices and a faster device is given more.
pipeline::DeviceCosts speed_weighted_work(const Options& o, const model::ModelSpec& spec,
                                          const Placement& p, int m,
                                          const std::vector<double>& flops) {
  std::map<std::pair<bool, int>, std::vector<double>> measured;  // (is CPU, threads) -> times
  pipeline::DeviceCosts out;
  const double total_flops = std::accumulate(flops.begin(), flops.end(), 0.0);
  for (size_t d = 0; d < p.devices.size(); ++d) {
    std::vector<double>& times = measured[{p.devices[d].is_cpu(), p.threads[d]}];
    if (times.empty()) times = profile_times(spec, p.devices[d], o.batch / m, o.seed);
    if (o.balance == "time" || total_flops <= 0) {
      out.push_back(times);
      continue;
    }
    const double per_flop = std::accumulate(times.begin(), times.end(), 0.0) / total_flops;
    std::vector<double>& row = out.emplace_back();
    for (double f : flops) row.push_back(f * per_flop);
  }
  return out;
}

// --max-activations: what a device holds at once, from a stage's F to its W (or BW), follows
// from the order of its list alone (its compute stream runs the list in order), so the bound
// is checked on the lists here and holds for any timing — the measured trace's too.
void check_activation_budget(const Options& o, const std::vector<int>& bounds,
                             const pipeline::LoweredSchedule& lowered,
                             const std::vector<Device>& devices) {
  const std::vector<int> peak = pipeline::peak_live(lowered);  // in chunks: (stage, micro-batch)
  for (size_t d = 0; d < peak.size(); ++d) {
    if (bounds[d] == 0 || peak[d] <= bounds[d] * lowered.chunks) continue;
    std::string asked;
    for (int b : o.max_activations) {
      if (!asked.empty()) asked += ',';
      asked += std::to_string(b);
    }
    const std::string held = format_number(static_cast<double>(peak[d]) / lowered.chunks);
    throw UsageError("--max-activations " + asked + ": schedule " + lowered.name +
                     " holds up to " + held + " micro-batches' activations on device " +
                     std::to_string(d) + " (" + devices[d].str() + ", bound " +
                     std::to_string(bounds[d]) + "); --schedule zb-auto plans within the bound, "
                     "and v-half or v-min hold about a half or a third of 1f1b's");
  }
}

}  // namespace

int stage_count(const Options& o, const model::ModelSpec& spec, int devices) {
  const int64_t stages = static_cast<int64_t>(devices) * o.chunks;  // --chunks may be huge
  if (stages > static_cast<int64_t>(spec.layers.size()))
    throw UsageError(std::to_string(stages) + " stages (" + std::to_string(devices) +
                     " devices x " + std::to_string(o.chunks) + " chunks) but the model has only " +
                     std::to_string(spec.layers.size()) + " layers");
  return static_cast<int>(stages);
}

BuiltPipeline build_pipeline(const Options& o, const model::ModelSpec& spec, const Placement& p,
                             int m, int64_t step_rows, TrainingProcesses& processes) {
  BuiltPipeline s;
  const int devices = static_cast<int>(p.devices.size());
  // Cut the model into devices x chunks stages: by the (merged) device blocks, or by cost.
  stage_count(o, spec, devices);
  // A schedule file is read first: its header says where it places the stages (looped or a
  // V), and the cut over the devices must follow that placement.
  std::optional<pipeline::LoweredSchedule> from_file;
  if (!o.schedule_file.empty()) from_file = schedule_from_file(o.schedule_file, devices, o.chunks, m);
  const pipeline::Placement placement =
      from_file ? from_file->placement : pipeline::placement_of(o.schedule);
  // What --balance weighs each layer by (blocks: the forward FLOPs, shown beside the blocks),
  // as a row per device: the same row for devices alike; for devices of different speeds,
  // the time each layer takes on each (measured, or its FLOPs at the device's measured speed).
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const std::vector<double> flops = pipeline::layer_costs(shapes, pipeline::CostKind::flops);
  const bool timed = o.balance == "time";
  const pipeline::DeviceCosts uneven =
      p.uniform() ? pipeline::DeviceCosts{} : speed_weighted_work(o, spec, p, m, flops);
  const auto alike = [&](const std::vector<double>& row) {
    return pipeline::DeviceCosts(static_cast<size_t>(devices), row);
  };
  // The work of each layer on each device: what zb-auto plans with and the warning weighs.
  const pipeline::DeviceCosts work =
      !uneven.empty() ? uneven
      : timed         ? alike(profile_times(spec, p.devices[0], o.batch / m, o.seed))
                      : alike(flops);
  pipeline::DeviceCosts costs = alike(flops);  // what the cut weighs; what the stage lines say
  pipeline::Partition partition;
  if (o.balance == "blocks") {
    if (o.chunks != 1)
      throw UsageError("--chunks " + std::to_string(o.chunks) +
                       " needs the model cut into devices x chunks stages: add --balance "
                       "params|memory|time");
    model::ModelSpec merged = spec;  // block b -> the index of its device
    for (model::LayerSpec& l : merged.layers)
      l.device = static_cast<int>(
          std::find(p.devices.begin(), p.devices.end(), p.block_devices[l.device]) -
          p.devices.begin());
    merged.device_count = devices;
    partition = pipeline::from_device_blocks(merged);
  } else {
    // Parameters and activation bytes are what they are on any device; time and FLOPs are
    // weighed on the device that will run them.
    if (o.balance == "params")
      costs = alike(pipeline::layer_costs(shapes, pipeline::CostKind::params));
    if (o.balance == "memory")
      costs = alike(pipeline::layer_costs(shapes, pipeline::CostKind::activations));
    if (timed) costs = work;
    partition = cut_by_cost(o.balance == "flops" ? work : costs, o.chunks, placement);
  }
  // zb-auto plans its W's for the stages' costs before anything has run: each stage's forward
  // FLOPs (at its device's speed), with each half of the backward costing about a forward (the
  // same GEMMs, transposed).
  pipeline::CostModel planned;
  if (o.schedule == "zb-auto") {
    for (int st = 0; st < partition.count(); ++st) {
      const pipeline::StageRange& r = partition.stages[static_cast<size_t>(st)];
      const auto& row = work[static_cast<size_t>(pipeline::stage_device(st, devices, placement))];
      double c = 0;
      for (size_t i = r.begin; i < r.end; ++i) c += row[i];
      planned.stages.push_back({.f = c, .b = c, .w = c});
    }
  }
  // A rank runs one device; the CPU devices standing for the others are never used, so the
  // step's memory is weighed where one process runs them all.
  std::optional<StepMemory> memory;
  if (!processes.distributed())
    memory = step_memory(o, spec, p.devices, partition, placement, m, step_rows);
  // zb-auto keeps each device within its --max-activations (without one: p micro-batches).
  const std::vector<int> bounds =
      per_device(o.max_activations, "--max-activations", o, p.devices.size());
  std::vector<int> planned_bounds;
  for (int b : bounds) planned_bounds.push_back(b > 0 ? b : devices);
  pipeline::LoweredSchedule lowered;  // what the runtime runs: the lists with their transfers
  try {
    lowered = from_file ? *std::move(from_file)
                        : pipeline::lower(pipeline::make_schedule(o.schedule, devices, m, o.chunks,
                                                                  planned, planned_bounds));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  check_activation_budget(o, bounds, lowered, p.devices);
  const pipeline::Schedule schedule = pipeline::compute_only(lowered);
  if (memory) check_step_memory(o, *memory, p.devices, schedule, step_rows);
  const model::ModelSpec placed = pipeline::place(spec, partition, devices, placement);
  s.model = layers::Sequential::from_spec(placed, p.devices, o.seed);
  s.runner = processes.make_runner(*s.model, partition, std::move(lowered), o);
  s.placement = describe_stages(partition, spec, p.devices, o.balance, costs, placement);
  s.warning = imbalance_warning(partition, spec, p.devices, o.chunks, work,
                                timed            ? "measured time"
                                : uneven.empty() ? "forward FLOPs"
                                                 : "forward FLOPs at each device's speed",
                                o.command, placement);
  // Ranks run on machines of their own; one process runs all its CPU devices on this one.
  const std::string shared =
      processes.distributed() ? "" : shared_cores_warning(p, hardware_threads());
  if (!shared.empty()) s.warning += (s.warning.empty() ? "" : "\n") + shared;
  return s;
}

}  // namespace brigade::train

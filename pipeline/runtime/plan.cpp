#include "pipeline/runtime/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "engine/error.h"
#include "pipeline/runtime/profile.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

const char* balance_name(Balance balance) {
  switch (balance) {
    case Balance::blocks: return "blocks";
    case Balance::flops: return "flops";
    case Balance::params: return "params";
    case Balance::memory: return "memory";
    case Balance::time: return "time";
  }
  return "?";
}

Balance parse_balance(std::string_view text) {
  for (Balance b : {Balance::blocks, Balance::flops, Balance::params, Balance::memory, Balance::time})
    if (text == balance_name(b)) return b;
  throw std::invalid_argument("unknown balance '" + std::string(text) +
                              "'; known: blocks flops params memory time");
}

bool run_alike(const std::vector<Device>& devices, const std::vector<int>& threads) {
  for (size_t i = 1; i < devices.size(); ++i)
    if (devices[i].kind != devices[0].kind ||
        (!threads.empty() && threads[i] != threads[0]))
      return false;
  return true;
}

namespace {

// Stage s's cost: its layers' on the device that runs it.
double stage_cost(const Plan& plan, const DeviceCosts& costs, int s) {
  const StageRange& r = plan.cut.stages[static_cast<size_t>(s)];
  const std::vector<double>& row = costs[static_cast<size_t>(plan.device_of(s))];
  double c = 0;
  for (size_t i = r.begin; i < r.end; ++i) c += row[i];
  return c;
}

// The model's device blocks onto the devices: with fewer devices than blocks, block b goes to
// device floor(b·D / K) (K blocks, D devices), so every device gets a contiguous run of blocks
// and the runs differ by at most one block.
Partition cut_at_blocks(const model::ModelSpec& spec, int devices) {
  const int blocks = spec.device_count;
  BRIGADE_CHECK(devices <= blocks, "plan: " << devices << " devices but the model has " << blocks
                                            << " device blocks; cut it by cost instead");
  model::ModelSpec merged = spec;
  for (model::LayerSpec& l : merged.layers)
    l.device = static_cast<int>(std::min(int64_t{l.device} * devices / blocks, int64_t{devices} - 1));
  merged.device_count = devices;
  return from_device_blocks(merged);
}

// Each layer's work on each device: the same row for devices alike (its forward FLOPs, or its
// measured time); for devices of different speeds, its time on each (measured, or its FLOPs
// at the device's measured speed: its time per FLOP), so that rows compare across devices.
void weigh_work(Plan& plan, const model::ModelSpec& spec, const PlanRequest& r, bool alike,
                const std::vector<double>& flops) {
  const size_t p = r.devices.size();
  const bool timed = r.balance == Balance::time;
  DeviceCosts times = r.layer_times;
  if (times.empty() && (timed || !alike)) {
    std::vector<int64_t> dims = spec.input;
    dims[0] = r.profile_rows;  // (rows, C, H, W)
    const Shape shape(dims);
    times = profile_devices(spec, r.devices, r.threads,
                            std::vector<float>(static_cast<size_t>(shape.numel()), 0.0f), shape,
                            r.seed);
  }
  BRIGADE_CHECK(times.empty() || times.size() == p,
                "plan: layer times for " << times.size() << " devices, " << p << " devices");
  const double total_flops = std::accumulate(flops.begin(), flops.end(), 0.0);
  if (timed || (!alike && total_flops <= 0)) {
    plan.work = times;
  } else if (alike) {
    plan.work = DeviceCosts(p, flops);
  } else {
    for (const std::vector<double>& row : times) {
      const double per_flop = std::accumulate(row.begin(), row.end(), 0.0) / total_flops;
      std::vector<double>& scaled = plan.work.emplace_back();
      for (double f : flops) scaled.push_back(f * per_flop);
    }
  }
  plan.work_name = timed ? "measured time"
                   : alike ? "forward FLOPs"
                           : "forward FLOPs at each device's speed";
}

// A schedule planned for its stages' costs (zb-h1, zb-h2, zb-auto): the measured ones, else
// each stage's work with each half of the backward costing about a forward (the same GEMMs,
// transposed).
CostModel planned_costs(const Plan& plan, const PlanRequest& r) {
  if (r.stage_costs) return *r.stage_costs;
  CostModel planned;
  for (int s = 0; s < plan.stages(); ++s) {
    const double c = stage_cost(plan, plan.work, s);
    planned.stages.push_back({.f = c, .b = c, .w = c});
  }
  return planned;
}

// What a device holds at once, from a stage's F to its W (or BW), follows from the order of
// its list alone (its compute stream runs the list in order), so the bound is checked on the
// lists and holds for any timing.
void check_bounds(const Plan& plan, const std::vector<int>& bounds) {
  const std::vector<int> peak = peak_live(plan.lowered);  // in chunks: (stage, micro-batch)
  for (size_t d = 0; d < peak.size() && d < bounds.size(); ++d) {
    if (bounds[d] == 0 || peak[d] <= bounds[d] * plan.lowered.chunks) continue;
    char held[32];
    std::snprintf(held, sizeof held, "%g", static_cast<double>(peak[d]) / plan.lowered.chunks);
    throw PlanError("max_activations",
                    "schedule " + plan.lowered.name + " holds up to " + held +
                        " micro-batches' activations on device " + std::to_string(d) + " (" +
                        plan.devices[d].str() + ", bound " + std::to_string(bounds[d]) +
                        "); zb-auto plans within the bound, and v-half or v-min "
                        "hold about a half or a third of 1f1b's");
  }
}

}  // namespace

int stage_count(size_t layers, int devices, int chunks) {
  const int64_t stages = int64_t{devices} * chunks;  // chunks may be huge
  if (chunks < 1 || stages > static_cast<int64_t>(layers))
    throw PlanError("chunks", std::to_string(stages) + " stages (" + std::to_string(devices) +
                                  " devices x " + std::to_string(chunks) +
                                  " chunks) but the model has only " + std::to_string(layers) +
                                  " layers");
  return static_cast<int>(stages);
}

Plan make_plan(const model::ModelSpec& spec, const PlanRequest& r) {
  const int p = static_cast<int>(r.devices.size());
  BRIGADE_CHECK(p >= 1, "plan: no devices");
  BRIGADE_CHECK(r.threads.empty() || r.threads.size() == r.devices.size(),
                "plan: " << r.threads.size() << " thread counts for " << p << " devices");
  const int stages = stage_count(spec.layers.size(), p, r.chunks);
  if (const std::optional<LoweredSchedule>& l = r.lowered;
      l && (l->devices != p || l->chunks != r.chunks || l->microbatches != r.microbatches ||
            l->batch_units != 1))
    throw PlanError("lowered", "lists of devices " + std::to_string(l->devices) + ", chunks " +
                                   std::to_string(l->chunks) + ", microbatches " +
                                   std::to_string(l->microbatches) + ", batch_units " +
                                   std::to_string(l->batch_units) + ", but the plan has " +
                                   std::to_string(p) + " devices, " + std::to_string(r.chunks) +
                                   " chunks, " + std::to_string(r.microbatches) +
                                   " micro-batches (batch_units must be 1)");
  std::vector<int> bounds = r.max_activations;
  if (bounds.empty()) bounds.assign(r.devices.size(), 0);
  BRIGADE_CHECK(bounds.size() == r.devices.size(),
                "plan: " << bounds.size() << " activation bounds for " << p << " devices");

  Plan plan;
  plan.devices = r.devices;
  plan.balance = r.balance;
  plan.chunks = r.chunks;
  plan.placement = r.lowered ? r.lowered->placement : placement_of(r.schedule);
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const std::vector<double> flops = layer_costs(shapes, CostKind::flops);
  weigh_work(plan, spec, r, r.alike || run_alike(r.devices, r.threads), flops);

  // The cut: the (merged) device blocks, or the exact balance of what the criterion weighs,
  // each stage on its own device. Parameters and activation bytes are what they are on any
  // device; FLOPs and time are weighed on the device that will run them.
  const auto alike = [&](const std::vector<double>& row) {
    return DeviceCosts(r.devices.size(), row);
  };
  plan.costs = alike(flops);
  if (r.balance == Balance::params) plan.costs = alike(layer_costs(shapes, CostKind::params));
  if (r.balance == Balance::memory) plan.costs = alike(layer_costs(shapes, CostKind::activations));
  if (r.balance == Balance::time) plan.costs = plan.work;
  if (r.balance == Balance::blocks) {
    BRIGADE_CHECK(r.chunks == 1, "plan: the device blocks are one stage per device, not "
                                     << r.chunks << " chunks");
    plan.cut = cut_at_blocks(spec, p);
  } else {
    plan.cut = balance(r.balance == Balance::flops ? plan.work : plan.costs, stages,
                       plan.placement);
  }

  // The order: the lists as given, or the schedule made (for the stages' costs and within the
  // bounds where it plans: without a bound, p micro-batches per device) and lowered.
  if (r.lowered) {
    plan.lowered = *r.lowered;
  } else {
    std::vector<int> planned_bounds;
    for (int b : bounds) planned_bounds.push_back(b > 0 ? b : p);
    const CostModel costs =
        schedule_kind(r.schedule).needs_costs ? planned_costs(plan, r) : CostModel{};
    plan.lowered =
        lower(make_schedule(r.schedule, p, r.microbatches, r.chunks, costs, planned_bounds));
  }
  check_bounds(plan, bounds);
  plan.schedule = compute_only(plan.lowered);
  return plan;
}

std::unique_ptr<layers::Sequential> build_model(const model::ModelSpec& spec, const Plan& plan,
                                                uint64_t seed) {
  return layers::Sequential::placed(spec, layer_devices(plan.cut, plan.devices, plan.placement),
                                   seed);
}

namespace {

// 278974 -> "278,974"
std::string grouped(double v) {
  const std::string digits = std::to_string(std::llabs(std::llround(v)));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string format_percent(double part, double total) {
  return fixed(total > 0 ? 100 * part / total : 0.0, 1) + " %";
}

std::string format_cost(Balance balance, double cost) {
  switch (balance) {
    case Balance::params: return grouped(cost) + " parameters";
    case Balance::memory: return format_bytes(static_cast<uint64_t>(cost)) + "/sample of activations";
    case Balance::time: return fixed(cost, 2) + " ms measured";
    case Balance::blocks:
    case Balance::flops: break;
  }
  return fixed(cost / 1e6, 1) + " MFLOP/sample forward";
}

std::string device_name(const Plan& plan, const std::vector<std::string>& names, size_t d) {
  return d < names.size() ? names[d] : plan.devices[d].str();
}

std::string describe_stages(const Plan& plan, const model::ModelSpec& spec,
                            const std::vector<std::string>& names) {
  double total = 0;  // each stage weighed on its own device
  for (int s = 0; s < plan.stages(); ++s) total += stage_cost(plan, plan.costs, s);
  std::ostringstream os;
  for (int s = 0; s < plan.stages(); ++s) {
    const StageRange& r = plan.cut.stages[static_cast<size_t>(s)];
    const double cost = stage_cost(plan, plan.costs, s);
    os << "\n  stage " << s << " on "
       << device_name(plan, names, static_cast<size_t>(plan.device_of(s))) << ": "
       << spec.layers[r.begin].name;
    if (r.size() > 1) os << " .. " << spec.layers[r.end - 1].name;
    os << " (" << r.size() << (r.size() == 1 ? " layer), " : " layers), ")
       << format_cost(plan.balance, cost) << " (" << format_percent(cost, total) << ")";
  }
  return os.str();
}

std::optional<Imbalance> find_imbalance(const Plan& plan, size_t layers, double min_share) {
  const size_t d = plan.devices.size();
  if (d < 2) return std::nullopt;
  Imbalance out;
  out.totals = device_totals(plan.cut, plan.work, plan.placement);
  const double total = std::accumulate(out.totals.begin(), out.totals.end(), 0.0);
  if (total <= 0) return std::nullopt;
  for (size_t i = 1; i < d; ++i) {
    if (out.totals[i] < out.totals[out.lightest]) out.lightest = i;
    if (out.totals[i] > out.totals[out.heaviest]) out.heaviest = i;
  }
  if (out.totals[out.lightest] >= min_share * total) return std::nullopt;
  // The cut by the same work over these devices, or over fewer: the first with every share.
  for (size_t fewer = d; fewer >= 1; --fewer) {
    const size_t stages = fewer * static_cast<size_t>(plan.chunks);
    if (stages > layers) continue;
    // The shares sum to the total, so over more than 1 / min_share devices the least is below
    // min_share whatever the cut: no cut to weigh (a model of many device blocks would weigh
    // one per device count, each as long as planning).
    if (fewer > 1 && static_cast<double>(fewer) * min_share > 1.0) continue;
    const DeviceCosts first(plan.work.begin(), plan.work.begin() + static_cast<std::ptrdiff_t>(fewer));
    const Partition cut = balance(first, static_cast<int>(stages), plan.placement);
    std::vector<double> balanced = device_totals(cut, first, plan.placement);
    const double least = *std::min_element(balanced.begin(), balanced.end());
    if (fewer > 1 && least < min_share * total) continue;
    out.devices = fewer;
    out.balanced = std::move(balanced);
    return out;
  }
  return out;
}

}  // namespace brigade::pipeline

// The schedule bench behind brigade-bench-pipeline: a model cut over virtual CPU devices,
// each schedule run for some timed steps on one mini-batch, the measured rate beside the
// simulator's replay of the measured step, and for devices of different speeds the rate the
// simulator predicts from each device's profile alone. Header-only: one program uses it, and
// brigade-bench-pipeline.cpp holds what it prints.
//
//   Bench::partition  the cut for the devices' profiles (pipeline/runtime/profile.h)
//   Bench::run        one schedule's plan (pipeline/runtime/plan.h) on that cut, timed
//   Bench::predicted_rate  the simulator's rate for a cut from the profiles alone
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "layers/model/model_file.h"
#include "pipeline/runtime/partition.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/profile.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/cost_model.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/trace.h"
#include "tools/data/dataset.h"

namespace brigade::bench {

using namespace brigade::pipeline;

// Samples [first, first + n) of the data set (wrapping), as floats in [0, 1].
inline HostBatch batch_of(const data::Dataset& ds, int64_t first, int64_t n) {
  HostBatch b;
  b.shape = Shape({n, ds.channels, ds.height, ds.width});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = (first + i) % ds.count;
    for (int64_t j = 0; j < ds.sample_size(); ++j)
      b.x.push_back(ds.pixels[static_cast<size_t>(k * ds.sample_size() + j)] / 255.0f);
    b.labels.push_back(ds.labels[static_cast<size_t>(k)]);
  }
  return b;
}

inline std::unique_ptr<layers::Optimizer> sgd(std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::SGD>(std::move(params), SgdParams{.lr = 0.05, .momentum = 0.9});
}

// cpu:1 .. cpu:p, device i with threads[i] compute threads (one each when `threads` is empty).
inline std::vector<Device> cpu_devices(int p, const std::vector<int>& threads = {}) {
  std::vector<Device> d;
  for (int i = 0; i < p; ++i) {
    configure_cpu_device(i + 1, {.threads = threads.empty() ? 1 : threads[static_cast<size_t>(i)]});
    d.push_back(Device::cpu(i + 1));
  }
  return d;
}

// One measured row of the table.
struct Row {
  std::string name;
  int m = 0;
  bool recompute = false;
  double rate = 0, sim_rate = 0, bubble = 0, sim_bubble = 0;
};

// Runs schedules on the CPU devices and remembers each one's measured steps, so that zb-auto
// can be planned from the costs 1f1b (fused backward) and zb-h1 (split) measured.
class Bench {
 public:
  // layer_times: a row of profiled times per device (its own), or one row for devices alike,
  // each on a micro-batch of profiled_rows samples.
  Bench(const model::ModelSpec& spec, std::vector<Device> devices, HostBatch batch,
        DeviceCosts layer_times, int64_t profiled_rows, int steps)
      : spec_(spec), devices_(std::move(devices)), batch_(std::move(batch)),
        times_(std::move(layer_times)), profiled_rows_(profiled_rows), steps_(steps) {
    if (times_.size() == 1) times_.resize(devices_.size(), times_[0]);
  }

  int p() const { return static_cast<int>(devices_.size()); }

  // Stages balanced by profiled time, each weighed on its device: per stage for one stage per
  // device; with several (v > 1) per DEVICE total, as the placement puts them.
  Partition partition(int stages, Placement placement = Placement::looped) const {
    return balance(times_, stages, placement);
  }
  // The cut, each stage's cost as profiled on its own device.
  std::string describe(int stages) const {
    const Partition cut = partition(stages);
    std::vector<double> on_its_device(times_[0].size());
    for (int s = 0; s < cut.count(); ++s) {
      const StageRange& r = cut.stages[static_cast<size_t>(s)];
      for (size_t i = r.begin; i < r.end; ++i) on_its_device[i] = device_times(s)[i];
    }
    return format_partition(cut, spec_, on_its_device, p());
  }

  // What the simulator predicts for `name` on `cut` (one stage per device) from the profiles
  // alone, in samples/s: each stage costs its layers' profiled times on its own device, scaled
  // from the profile's rows to a micro-batch's, split F:B:W as 1:1:1 (the backward is two
  // GEMMs per forward one). The rate of devices whose speeds do not change when the others
  // work: devices that share no cores.
  double predicted_rate(const std::string& name, int m, const Partition& cut) const {
    m = pieces(name, m);
    const double rows = static_cast<double>(batch_.labels.size()) / m;
    CostModel costs;
    for (int s = 0; s < cut.count(); ++s) {
      const StageRange& r = cut.stages[static_cast<size_t>(s)];
      double c = 0;
      for (size_t i = r.begin; i < r.end; ++i) c += device_times(s)[i];
      c *= rows / static_cast<double>(profiled_rows_) / 3;
      costs.stages.push_back({.f = c, .b = c, .w = c});
    }
    const Schedule s = schedule_kind(name).needs_costs ? make_schedule(name, p(), m, 1, costs)
                                                       : make_schedule(name, p(), m, 1);
    return static_cast<double>(batch_.labels.size()) / (simulate(s, costs).stats.makespan / 1000.0);
  }

  // The baseline every row is measured against: naive with the mini-batch uncut, whatever
  // the row's m (naive over m micro-batches would take as long, in smaller GEMMs).
  static int pieces(const std::string& name, int m) { return name == "naive" ? 1 : m; }

  // The plan of `name` at (m, recompute): stages balanced by the profiled times, zb-auto and
  // zb-h2 planned from the costs 1f1b and zb-h1 measured. zb-h1 itself, whose steps measure
  // the split backward, is planned from the profiles.
  PlanRequest request(const std::string& name, int m, bool recompute) {
    PlanRequest r{.devices = devices_, .balance = Balance::time, .schedule = name,
                  .chunks = default_chunks(name), .microbatches = pieces(name, m),
                  .layer_times = times_};
    if (schedule_kind(name).needs_costs && name != "zb-h1")
      r.stage_costs = measured_costs(m, recompute);
    return r;
  }

  // Per-stage medians over the timed steps of 1f1b and zb-h1 at (m, recompute), run now if
  // the table has not run them.
  CostModel measured_costs(int m, bool recompute) {
    std::vector<const Timeline*> all;
    for (const char* name : {"1f1b", "zb-h1"})
      for (const Timeline& t : steps(name, m, recompute)) all.push_back(&t);
    return median_stage_costs(all, p());
  }

  // `steps_` timed steps after one warm-up: the rate in samples/s, and the last step against
  // the simulator.
  Row run(const std::string& name, int m, bool recompute) {
    const Plan plan = make_plan(spec_, request(name, m, recompute));
    const Schedule& s = plan.schedule;
    auto model = build_model(spec_, plan, 1);
    Runtime runtime(*model, plan.devices, plan.cut, plan.lowered, sgd,
                    {.seed = 7, .recompute = recompute});
    runtime.step(batch_, 0);  // warm-up: caches of the allocators, first-touch pages
    std::vector<Timeline>& timed = steps_of_[{name, m, recompute}];
    timed.clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 1; k <= steps_; ++k)
      timed.push_back(runtime.step(batch_, static_cast<uint32_t>(k)).timeline);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const TraceComparison c = compare_with_simulation(s, timed.back());
    const double n = static_cast<double>(batch_.labels.size());
    return {name, m, recompute, n * steps_ / sec, n / (c.simulated.stats.makespan / 1000.0),
            c.measured.bubble_fraction, c.simulated.stats.bubble_fraction};
  }

 private:
  // The profile of the device that runs stage s (looped: s mod p).
  const std::vector<double>& device_times(int s) const {
    return times_[static_cast<size_t>(s % p())];
  }
  const std::vector<Timeline>& steps(const std::string& name, int m, bool recompute) {
    if (!steps_of_.count({name, m, recompute})) run(name, m, recompute);
    return steps_of_.at({name, m, recompute});
  }

  const model::ModelSpec& spec_;
  std::vector<Device> devices_;
  HostBatch batch_;
  DeviceCosts times_;  // [device][layer]
  int64_t profiled_rows_;
  int steps_;
  std::map<std::tuple<std::string, int, bool>, std::vector<Timeline>> steps_of_;
};

}  // namespace brigade::bench

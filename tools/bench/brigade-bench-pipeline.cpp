// brigade-bench-pipeline: samples/s of every schedule against `naive` on virtual CPU devices,
// with and without recomputation, next to the simulator's prediction from the measured
// per-action costs (pipeline/trace.h). Not a test: it measures, and prints a table.
//
//   brigade-bench-pipeline --devices 2 --batch 128 --microbatches 4,8,16
//   brigade-bench-pipeline --train 40      # the question's network over 3 devices, loss falls
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <map>

#include "layers/model_file.h"
#include "pipeline/generators/generators.h"
#include "pipeline/partition.h"
#include "pipeline/runtime.h"
#include "pipeline/svg.h"
#include "pipeline/chrome_trace.h"
#include "pipeline/trace.h"
#include "tools/data/dataset.h"

using namespace brigade;
using namespace brigade::pipeline;

namespace {

// Samples [first, first + n) of the data set (wrapping), as floats in [0, 1].
HostBatch batch_of(const data::Dataset& ds, int64_t first, int64_t n) {
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

std::unique_ptr<layers::Optimizer> sgd(std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::SGD>(std::move(params), SgdParams{.lr = 0.05, .momentum = 0.9});
}

std::vector<Device> cpu_devices(int p) {
  std::vector<Device> d;
  for (int i = 0; i < p; ++i) {
    configure_cpu_device(i + 1, {.threads = 1});
    d.push_back(Device::cpu(i + 1));
  }
  return d;
}

// The question's placement, `steps` steps of 1F1B on synthetic data: prints the loss.
int train(const model::ModelSpec& spec, int steps, const std::string& trace) {
  const Partition partition = from_device_blocks(spec);
  const int p = partition.count();
  auto model = layers::Sequential::from_spec(spec, cpu_devices(p), 1);
  const auto shapes = model::infer_shapes(spec.input, spec.layers);
  std::printf("%s", format_partition(partition, spec, layer_costs(shapes, CostKind::flops), p).c_str());
  Runtime runtime(*model, partition, make_schedule("1f1b", p, 4), sgd, {.seed = 7});
  const data::Dataset ds = data::make_synthetic(data::Split::train, 3, 4096);
  StepResult r;
  for (int s = 0; s < steps; ++s) {
    r = runtime.step(batch_of(ds, s * 32, 32), static_cast<uint32_t>(s));
    std::printf("step %3d  loss %.4f\n", s, r.loss);
  }
  if (!trace.empty()) {
    write_svg({r.timeline}, trace + ".svg");
    write_chrome_trace(r.timeline, trace + ".json");
    std::printf("wrote %s.svg and %s.json\n", trace.c_str(), trace.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"samples/s of every pipeline schedule on virtual CPU devices"};
  std::string model_path = "tools/models/seed_cnn.model";
  int p = 2, batch = 128, steps = 3, train_steps = 0;
  std::vector<int> ms = {4, 8, 16};
  std::vector<std::string> schedules = {"naive", "gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
  std::string trace;
  app.add_option("--model", model_path, "model file");
  app.add_option("--devices", p, "CPU devices, one compute thread each")->check(CLI::Range(1, 8));
  app.add_option("--batch", batch, "mini-batch size")->check(CLI::Range(1, 4096));
  app.add_option("--microbatches", ms, "micro-batch counts")->delimiter(',');
  app.add_option("--schedules", schedules, "schedules")->delimiter(',');
  app.add_option("--steps", steps, "timed steps per row (after one warm-up)")->check(CLI::Range(1, 100));
  app.add_option("--train", train_steps, "instead: train the model file's own placement N steps");
  app.add_option("--trace", trace, "with --train: write PREFIX.svg and PREFIX.json of the last step");
  CLI11_PARSE(app, argc, argv);
  try {
    const model::ModelSpec spec = model::load_model_file(model_path);
    if (train_steps > 0) return train(spec, train_steps, trace);
    const data::Dataset ds = data::make_synthetic(data::Split::train, 3, batch);
    const HostBatch b = batch_of(ds, 0, batch);
    const std::vector<Device> devices = cpu_devices(p);
    // Balance by measured time: profile every layer on one device, one 16-sample micro-batch.
    auto whole = layers::Sequential::from_spec(place(spec, at_cuts(spec.layers.size(), {}), 1),
                                               {devices[0]}, 1);
    const HostBatch probe = batch_of(ds, 0, 16);
    const auto times = profile_layer_times(*whole, Tensor::from_vector(probe.x, probe.shape, devices[0]));
    std::printf("%-17s %3s %5s %10s %7s %10s %8s %9s %9s\n", "schedule", "m", "recomp",
                "samples/s", "xnaive", "sim smp/s", "meas/sim", "bubble %", "sim bub %");
    std::map<int, double> naive;  // per m
    for (int m : ms)
      for (const std::string& name : schedules)
        for (int recompute = 0; recompute < 2; ++recompute) {
          const int v = name == "interleaved-1f1b" ? 2 : 1;
          if (v > 1 && m % p != 0) continue;
          const Schedule schedule = make_schedule(name, p, m, v);
          const Partition partition = balance(times, schedule.stages());
          auto model = layers::Sequential::from_spec(place(spec, partition, p), devices, 1);
          Runtime runtime(*model, partition, schedule, sgd, {.seed = 7, .recompute = recompute == 1});
          runtime.step(b, 0);  // warm-up: caches of the allocators, first-touch pages
          StepResult last;
          const auto t0 = std::chrono::steady_clock::now();
          for (int s = 1; s <= steps; ++s) last = runtime.step(b, static_cast<uint32_t>(s));
          const double sec =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const double rate = batch * steps / sec;
          if (name == "naive" && recompute == 0) naive[m] = rate;
          const TraceComparison c = compare_with_simulation(schedule, last.timeline);
          const double sim_rate = batch / (c.simulated.stats.makespan / 1000.0);
          std::printf("%-17s %3d %5s %10.1f %7.2f %10.1f %8.2f %9.1f %9.1f\n", name.c_str(), m,
                      recompute ? "yes" : "no", rate, naive.count(m) ? rate / naive[m] : 0.0,
                      sim_rate, rate / sim_rate, 100 * c.measured.bubble_fraction,
                      100 * c.simulated.stats.bubble_fraction);
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-bench-pipeline: %s\n", e.what());
    return 1;
  }
  return 0;
}

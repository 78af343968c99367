// brigade-bench-pipeline: samples/s of every schedule against `naive` on virtual CPU devices,
// with and without recomputation, next to the simulator's prediction from the measured
// per-action costs (pipeline/schedule/trace.h; the runs are pipeline_bench.h's). Not a test:
// it measures, and prints a table, then the per-stage costs of a split and a fused backward
// (in the pipeline, and on one device with the two measured in alternation), what the
// simulator makes of them, and the figures the README's account of the targets needs.
//
// zb-auto is planned from measured costs: the per-stage medians over the timed steps of 1f1b
// (fused backward) and zb-h1 (split) at the same m and recomputation setting.
//
// With --threads-per-device (devices of different speeds), a last table: the cut made for
// each device's profile against the cut made as if all were alike, measured, and predicted by
// the simulator from the profiles.
//
//   brigade-bench-pipeline --devices 2 --batch 128 --microbatches 4,8,16
//   brigade-bench-pipeline --train 40      # the question's network over 3 devices, loss falls
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "kernels/ops.h"
#include "engine/output_file.h"
#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/svg.h"
#include "tools/bench/pipeline_bench.h"
#include "tools/command_line.h"
#include "tools/machine_load.h"
#include "tools/models/find_model.h"

using namespace brigade;
using namespace brigade::bench;
using namespace brigade::pipeline;

namespace {

// The question's placement, `steps` steps of 1F1B on synthetic data: prints the loss.
int train(const model::ModelSpec& spec, int steps, const std::string& trace) {
  const Plan plan = make_plan(spec, {.devices = cpu_devices(spec.device_count),
                                     .balance = Balance::blocks,
                                     .schedule = "1f1b",
                                     .microbatches = 4});
  auto model = build_model(spec, plan, 1);
  std::printf("%s\n", describe_stages(plan, spec).c_str());
  Runtime runtime(*model, plan.devices, plan.cut, plan.lowered, sgd, {.seed = 7});
  const data::Dataset ds = data::make_synthetic(data::Split::train, 3, 4096);
  StepResult r;
  for (int s = 0; s < steps; ++s) {
    r = runtime.step(batch_of(ds, s * 32, 32), static_cast<uint32_t>(s));
    std::printf("step %3d  loss %.4f\n", s, r.loss);
  }
  if (!trace.empty()) {
    brigade::write_whole_file(trace + ".svg", timeline_svg({r.timeline}));
    brigade::write_whole_file(trace + ".json", chrome_trace_json(r.timeline) + "\n");
    std::printf("wrote %s.svg and %s.json\n", trace.c_str(), trace.c_str());
  }
  return 0;
}

// Devices of different speeds: 1f1b and zb-auto on the cut for each device's profiled speed
// against the cut made from device 0's profile alone, as if every device ran like it; measured,
// and predicted by the simulator from the profiles (what devices that share no cores would
// gain: CPU devices on one machine's cores slow each other down, which the profile, taken one
// device at a time, does not see).
void print_uneven(Bench& aware, Bench alike, const std::vector<int>& ms) {
  std::printf("\ndevices of different speeds: samples/s on the cut for each device's speed, "
              "against the cut as if all ran like the first:\n%s%s",
              aware.describe(aware.p()).c_str(), alike.describe(alike.p()).c_str());
  std::printf("%-9s %3s %12s %12s %7s   %s\n", "schedule", "m", "as if alike", "their speeds",
              "ratio", "predicted from the profiles: alike, speeds, ratio");
  const Partition even = alike.partition(alike.p()), fitted = aware.partition(aware.p());
  for (int m : ms)
    for (const char* name : {"1f1b", "zb-auto"}) {
      const double measured_even = alike.run(name, m, false).rate;
      const double measured_fitted = aware.run(name, m, false).rate;
      const double predicted_even = aware.predicted_rate(name, m, even);
      const double predicted_fitted = aware.predicted_rate(name, m, fitted);
      std::printf("%-9s %3d %12.1f %12.1f %7.2f   %9.1f %9.1f %7.2f\n", name, m, measured_even,
                  measured_fitted, measured_fitted / measured_even, predicted_even,
                  predicted_fitted, predicted_fitted / predicted_even);
      std::fflush(stdout);
    }
}

// Split against fused backward, per stage, and what the simulator makes of it: does zb-h1
// lose to 1f1b by its order of actions, or because B + W costs more than BW?
void print_split_costs(Bench& bench, const std::vector<int>& ms, int batch) {
  std::printf("\nsplit against fused backward (ms per micro-batch, medians over the timed steps "
              "of 1f1b and zb-h1, no recomputation):\n");
  std::printf("%3s %5s %8s %8s %8s %8s %9s\n", "m", "stage", "F", "B", "W", "BW", "(B+W)/BW");
  for (int m : ms) {
    const CostModel c = bench.measured_costs(m, false);
    for (int st = 0; st < bench.p(); ++st) {
      const StageCost& s = c.stage(st);
      std::printf("%3d %5d %8.2f %8.2f %8.2f %8.2f %9.2f\n", m, st, s.f, s.b, s.w, s.fused(),
                  (s.b + s.w) / s.fused());
    }
  }
  std::printf("\nsimulated from those medians (samples/s); 'zb-h1 B+W=BW' scales each stage's B "
              "and W so that they cost its BW:\n");
  std::printf("%3s %9s %9s %14s %9s\n", "m", "1f1b", "zb-h1", "zb-h1 B+W=BW", "zb-auto");
  for (int m : ms) {
    const CostModel c = bench.measured_costs(m, false);
    CostModel even = c;
    for (StageCost& s : even.stages)
      if (s.b + s.w > 0) {
        const double k = s.fused() / (s.b + s.w);
        s.b *= k, s.w *= k;
      }
    auto rate = [&](const Schedule& s, const CostModel& costs) {
      return batch / (simulate(s, costs).stats.makespan / 1000.0);
    };
    std::printf("%3d %9.1f %9.1f %14.1f %9.1f\n", m, rate(one_f_one_b(bench.p(), m), c),
                rate(zb_h1(bench.p(), m), c), rate(zb_h1(bench.p(), m), even),
                rate(zb_auto(bench.p(), m, c), c));
  }
}

// Split against fused backward without the pipeline: each stage of the one-per-device cut on
// ONE device, a micro-batch of n/m samples, `reps` times a forward then the fused backward and
// a forward then B and W back to back, alternating, so that a shared machine's load falls on
// both alike. Medians in ms. Isolates what splitting costs in compute from everything else.
void print_split_probe(const model::ModelSpec& spec, Device device, const HostBatch& batch,
                       const Partition& cut, const std::vector<int>& ms, int reps) {
  auto whole = layers::Sequential::placed(spec, std::vector<Device>(spec.layers.size(), device), 1);
  const Stream stream = Stream::default_for(device);
  auto ms_since = [](auto t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  auto median = [](std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    return xs[xs.size() / 2];
  };
  std::printf("\nthe same on one device, no pipeline (medians of %d alternating runs, ms):\n", reps);
  std::printf("%3s %5s %8s %8s %8s %9s\n", "m", "stage", "BW", "B", "W", "(B+W)/BW");
  for (int m : ms) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(batch.labels.size()) / m);
    const int64_t per_sample = batch.shape.numel() / batch.shape[0];
    const std::vector<float> x0(batch.x.begin(), batch.x.begin() + n * per_sample);
    std::vector<int64_t> dims = batch.shape.dims();
    dims[0] = n;
    Tensor h = Tensor::from_vector(x0, Shape(dims), device);
    for (int st = 0; st < cut.count(); ++st) {
      const StageRange r = cut.stages[static_cast<size_t>(st)];
      std::vector<double> fused, b, w;
      Tensor y;
      for (int k = 0; k < 2 * reps; ++k) {
        layers::Tape tape;
        layers::ForwardContext ctx;
        ctx.tape = &tape;
        y = whole->forward(h, ctx, r.begin, r.end);
        Tensor dy = Tensor::empty(y.shape(), stream);
        ops::fill(dy, 1.0f, stream);
        stream.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        if (k % 2 == 0) {
          tape.backward(dy, st > 0);
          stream.synchronize();
          fused.push_back(ms_since(t0));
        } else {
          tape.backward_input(dy, st > 0);
          stream.synchronize();
          b.push_back(ms_since(t0));
          const auto t1 = std::chrono::steady_clock::now();
          tape.backward_params(dy);
          stream.synchronize();
          w.push_back(ms_since(t1));
        }
      }
      std::printf("%3d %5d %8.2f %8.2f %8.2f %9.2f\n", m, st, median(fused), median(b), median(w),
                  (median(b) + median(w)) / median(fused));
      h = y;
    }
  }
  whole->zero_grad();
}

// The figures the README's account needs, from the rows.
void print_summary(const std::vector<Row>& rows) {
  auto find = [&](const std::string& name, int m) -> const Row* {
    for (const Row& r : rows)
      if (r.name == name && r.m == m && !r.recompute) return &r;
    return nullptr;
  };
  std::printf("\nagainst the targets (no recomputation):\n");
  for (const Row& r : rows) {
    if (r.recompute || r.name != "1f1b") continue;
    const Row* naive = find("naive", r.m);
    if (naive) std::printf("  m=%-3d 1f1b %.2fx naive (target >= 1.45 at m=8)\n", r.m, r.rate / naive->rate);
    for (const char* zb : {"zb-h1", "zb-auto"})
      if (const Row* z = find(zb, r.m))
        std::printf("  m=%-3d %-7s / 1f1b = %.2f (target > 1)\n", r.m, zb, z->rate / r.rate);
  }
  int within = 0;
  double worst_gap = 0;
  for (const Row& r : rows) {
    within += std::abs(r.rate / r.sim_rate - 1) <= 0.10;
    worst_gap = std::max(worst_gap, 100 * std::abs(r.bubble - r.sim_bubble));
  }
  std::printf("  measured within 10 %% of simulated: %d of %zu rows; largest bubble gap %.1f "
              "points (target 5)\n", within, rows.size(), worst_gap);
}

// Why schedule `name` cannot run p devices at m micro-batches (its generator's refusal: an
// interleaved schedule wants m a multiple of p, a V at least 2p), or nothing.
std::optional<std::string> cannot_make(const std::string& name, int p, int m) {
  try {
    make_schedule(name, p, Bench::pieces(name, m), default_chunks(name));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return std::nullopt;
}

// Why the table cannot be measured as asked, before any layer is profiled: a schedule that
// does not exist, one with more stages than the model has layers, or no (schedule, m) that
// runs at all; else nothing. (A row a schedule cannot make at one m is skipped, said in it.)
std::optional<std::string> unrunnable(const model::ModelSpec& spec, int p,
                                      const std::vector<std::string>& schedules,
                                      const std::vector<int>& ms) {
  const std::vector<std::string>& known = schedule_names();
  bool any = false;
  for (const std::string& name : schedules) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += " " + k;
      return "--schedules: unknown schedule '" + name + "'; known:" + list;
    }
    const int stages = p * default_chunks(name);
    if (stages > static_cast<int>(spec.layers.size()))
      return "--schedules " + name + " on --devices " + std::to_string(p) + ": " +
             std::to_string(stages) + " stages, but the model has " +
             std::to_string(spec.layers.size()) + " layers";
    for (int m : ms) any = any || !cannot_make(name, p, m);
  }
  if (!any) return "no schedule of --schedules runs at any --microbatches count (" +
                   *cannot_make(schedules.empty() ? "" : schedules.front(), p, ms.front()) + ")";
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"samples/s of every pipeline schedule on virtual CPU devices"};
  cli::show_defaults(app);
  std::string model_path = "seed_cnn";
  int p = 2, batch = 128, steps = 3, train_steps = 0;
  std::vector<int> ms = {4, 8, 16};
  std::vector<std::string> schedules = {"naive", "gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                        "zb-auto"};
  std::string trace;
  std::vector<int> threads;  // per device; empty: one each
  app.add_option("--model", model_path,
                 "model: NAME (tools/models/NAME.model) or a model FILE");
  app.add_option("--devices", p, "CPU devices, one compute thread each")->check(CLI::Range(1, 8));
  app.add_option("--threads-per-device", threads,
                 "compute threads of each device, e.g. 2,1: devices of different speeds, cut for "
                 "their speeds and, in a last table, against the cut made as if they were alike")
      ->default_str("1 each")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--batch", batch, "mini-batch size")->check(CLI::Range(1, 4096));
  app.add_option("--microbatches", ms, "micro-batch counts, each at most --batch")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--schedules", schedules, "schedules")->delimiter(',');
  app.add_option("--steps", steps, "timed steps per row (after one warm-up)")->check(CLI::Range(1, 100));
  app.add_option("--train", train_steps,
                 "instead: train the model file's own placement N steps (0: measure)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--trace", trace, "with --train: write PREFIX.svg and PREFIX.json of the last step")
      ->default_str(cli::kNotGiven);
  if (const auto status = cli::parse_or_exit_status(app, argc, argv, "brigade-bench-pipeline"))
    return *status;
  for (int m : ms)
    if (m > batch) {  // a micro-batch of no sample
      std::fprintf(stderr, "brigade-bench-pipeline: --microbatches %d is more than the --batch %d "
                   "samples: every micro-batch needs a sample\n", m, batch);
      return cli::kUsageStatus;
    }
  if (!threads.empty() && static_cast<int>(threads.size()) != p) {
    std::fprintf(stderr, "brigade-bench-pipeline: --threads-per-device has %zu counts for %d "
                 "devices\n", threads.size(), p);
    return cli::kUsageStatus;
  }
  const std::optional<model::ModelSpec> model_spec =
      models::load_model_or_say_why(model_path, BRIGADE_MODELS_DIR, "brigade-bench-pipeline");
  if (!model_spec) return cli::kUsageStatus;
  const model::ModelSpec& spec = *model_spec;
  if (!trace.empty() && train_steps == 0) {  // measuring writes no trace
    std::fprintf(stderr, "brigade-bench-pipeline: --trace is for --train N: measuring the "
                 "schedules writes none\n");
    return cli::kUsageStatus;
  }
  if (!trace.empty()) {  // PREFIX.svg and PREFIX.json, written after the training
    try {
      cli::check_output_file("--trace", trace + ".svg");
    } catch (const cli::UsageError& e) {
      std::fprintf(stderr, "brigade-bench-pipeline: %s\n", e.what());
      return cli::kUsageStatus;
    }
  }
  if (train_steps == 0) {
    if (const std::optional<std::string> why = unrunnable(spec, p, schedules, ms)) {
      std::fprintf(stderr, "brigade-bench-pipeline: %s\n", why->c_str());
      return cli::kUsageStatus;
    }
    // naive first at each m: every row's xnaive is against it.
    std::stable_partition(schedules.begin(), schedules.end(),
                          [](const std::string& n) { return n == "naive"; });
  }
  try {
    if (train_steps > 0) return train(spec, train_steps, trace);
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    const std::optional<tools::LoadAverage> load = tools::read_load_average();
    std::printf("%s\nload average at the start: %s\n", command.c_str(),
                tools::describe_load(load).c_str());
    const std::string busy =
        tools::busy_machine_warning(load, static_cast<int>(std::thread::hardware_concurrency()));
    if (!busy.empty()) std::fprintf(stderr, "%s\n", busy.c_str());
    const data::Dataset ds = data::make_synthetic(data::Split::train, 3, batch);
    const std::vector<Device> devices = cpu_devices(p, threads);
    // Balance by measured time: profile every layer on each device (once per thread count),
    // one micro-batch of the first --microbatches count (how well a device's threads share a
    // layer depends on its rows).
    const int64_t probe_rows = std::max<int64_t>(1, batch / ms.front());
    const HostBatch probe = batch_of(ds, 0, probe_rows);
    const DeviceCosts times = profile_devices(spec, devices, threads, probe.x, probe.shape, 1);
    const bool uneven = std::any_of(threads.begin(), threads.end(),
                                    [&](int t) { return t != threads[0]; });
    Bench bench(spec, devices, batch_of(ds, 0, batch), times, probe_rows, steps);
    std::printf("stages by profiled time, one per device:\n%s", bench.describe(p).c_str());
    if (std::any_of(schedules.begin(), schedules.end(),
                    [](const std::string& n) { return default_chunks(n) > 1; }))
      std::printf("two chunks per device (v = 2), balanced per device:\n%s",
                  bench.describe(2 * p).c_str());
    std::printf("%-17s %3s %5s %10s %7s %10s %8s %9s %9s\n", "schedule", "m", "recomp",
                "samples/s", "xnaive", "sim smp/s", "meas/sim", "bubble %", "sim bub %");
    std::vector<Row> rows;
    std::map<int, double> naive;  // per m
    for (int m : ms)
      for (const std::string& name : schedules)
        for (int recompute = 0; recompute < 2; ++recompute) {
          if (const std::optional<std::string> why = cannot_make(name, p, m)) {
            if (recompute == 0)
              std::printf("%-17s %3d skipped: %s\n", name.c_str(), m, why->c_str());
            continue;
          }
          const Row r = bench.run(name, m, recompute == 1);
          if (name == "naive" && !r.recompute) naive[m] = r.rate;
          char against[16] = "      -";  // no naive row at this m
          if (naive.count(m)) std::snprintf(against, sizeof against, "%7.2f", r.rate / naive[m]);
          std::printf("%-17s %3d %5s %10.1f %s %10.1f %8.2f %9.1f %9.1f\n", name.c_str(), m,
                      recompute ? "yes" : "no", r.rate, against, r.sim_rate, r.rate / r.sim_rate,
                      100 * r.bubble, 100 * r.sim_bubble);
          std::fflush(stdout);
          rows.push_back(r);
        }
    if (uneven)
      print_uneven(bench,
                   Bench(spec, devices, batch_of(ds, 0, batch), {times[0]}, probe_rows, steps), ms);
    if (p > 1) print_split_costs(bench, ms, batch);
    if (p > 1) print_split_probe(spec, devices[0], batch_of(ds, 0, batch), bench.partition(p), ms, 7);
    print_summary(rows);
    std::printf("load average at the end: %s\n",
                tools::describe_load(tools::read_load_average()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-bench-pipeline: %s\n", e.what());
    return 1;
  }
  return 0;
}

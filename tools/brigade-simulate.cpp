// brigade-simulate: generate, validate, simulate and draw pipeline schedules.
//
//   brigade-simulate --schedule all --stages 4 --microbatches 8
//   brigade-simulate --schedule zb-h1 --stages 4 --microbatches 8
//                    --cost f=1,b=1,w=1,comm=0.1 --svg zb.svg --trace zb.json
//
// Costs (--cost) are those of one device's share of the model for one micro-batch, so every
// schedule runs the same model: an interleaved schedule with v chunks per device gives each
// chunk 1/v of them.
// --device-weights 1,1,2,1 multiplies device d's share (an unbalanced partition).
//
// Lowered lists (pipeline/schedule/lowering.h) and schedule files (pipeline/schedule/schedule_text.h):
//   brigade-simulate --schedule 1f1b --stages 4 --microbatches 8 --print-schedule [--lowered]
//   brigade-simulate --schedule zb-h1 --lowered --cost f=1,b=1,w=1,comm=0.2 --trace zb.json
//   brigade-simulate --schedule-file my.schedule [--max-live 4]
//   brigade-simulate --schedule interleaved-1f1b --print-schedule --format pytorch-csv > i.csv
//   brigade-simulate --schedule-file i.csv          (PyTorch's CSV, pipeline/schedule/pytorch_csv.h)
//   brigade-simulate --schedule zb-h1 --print-schedule --svg zb.svg > zb.schedule  (and a picture)
// --lowered simulates the lists with their sends and receives (send and receive lanes,
// arrows from each send to its receive in the trace); a file is validated, lowered if it is
// compute-only, validated again (within --max-live live activations per device) and
// simulated that way, before anything else is printed.
//
// Beside each makespan: the lower bound (pipeline/schedule/lower_bound.h), the best any order
// of the schedule's actions could reach within the memory it holds, and the gap to it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/output_file.h"
#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/grid.h"
#include "pipeline/schedule/lower_bound.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/pytorch_csv.h"
#include "pipeline/schedule/schedule_text.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/svg.h"
#include "pipeline/schedule/validate.h"
#include "tools/command_line.h"

namespace bp = brigade::pipeline;

namespace {

struct Options {
  std::string schedule = "all";
  int devices = 4;
  int microbatches = 8;
  int chunks = 2;
  std::string cost = "f=1,b=1,w=1,comm=0";
  std::vector<double> device_weights;
  std::string svg, trace;
  bool quiet_grid = false;
  bool lowered = false;
  bool print_schedule = false;
  std::string format = "brigade";
  std::string schedule_file;
  std::optional<int> max_live;
};

// The largest cost or weight taken: the simulator sums costs over every action of a schedule,
// and its lower bound subtracts such sums, which stay exact far below a double's range (a
// cost of 1e308 summed to infinity, and infinity minus infinity never ended a loop).
constexpr double kMostCost = 1e15;

// The most (stage, micro-batch) pairs a generated schedule may have: p x v x m of 2^20 takes
// seconds and half a GiB (1f1b at p = m = 1024: 17 s, 0.5 GB); past it, minutes and gigabytes.
constexpr int64_t kMostStageMicrobatches = int64_t{1} << 20;

// "f=1,b=2,w=1,comm=0.5,act=1" -> the device-share costs; unknown keys are an error (a
// malformed flag: cli::UsageError, exit 2, as CLI11's own).
bp::StageCost parse_cost(const std::string& text, double& comm) {
  bp::StageCost c;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw brigade::cli::UsageError("--cost: '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    double value = 0;
    try {
      size_t used = 0;
      value = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw brigade::cli::UsageError("--cost: '" + item + "' has no number after '='");
    }
    if (!std::isfinite(value) || value < 0 || value > kMostCost)
      throw brigade::cli::UsageError("--cost: '" + item + "' is not a number from 0 to 1e15");
    if (key == "f") c.f = value;
    else if (key == "b") c.b = value;
    else if (key == "w") c.w = value;
    else if (key == "comm") comm = value;
    else if (key == "act") c.activation_bytes = value;
    else throw brigade::cli::UsageError("--cost: unknown key '" + key + "' (f, b, w, comm, act)");
  }
  return c;
}

// Per-stage costs for schedule s: device d's share times its weight, split over its chunks.
bp::CostModel cost_model(const bp::Schedule& s, const bp::StageCost& share, double comm,
                         const std::vector<double>& weights) {
  if (!weights.empty() && static_cast<int>(weights.size()) != s.devices)
    throw brigade::cli::UsageError("--device-weights has " + std::to_string(weights.size()) +
                                   " values for " + std::to_string(s.devices) + " devices");
  bp::CostModel model;
  model.comm = comm;
  for (int st = 0; st < s.stages(); ++st) {
    const double k = (weights.empty() ? 1.0 : weights[s.device_of(st)]) / s.chunks;
    model.stages.push_back({share.f * k, share.b * k, share.w * k, share.activation_bytes * k});
  }
  return model;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// "gpipe,1f1b" -> {"gpipe", "1f1b"}
std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

std::string with_suffix(const std::string& path, const std::string& name) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || dot < path.find_last_of('/') + 1) return path + "-" + name;
  return path.substr(0, dot) + "-" + name + path.substr(dot);
}

// The file form --format asks for: Brigade's (schedule_text.h) or PyTorch's CSV (pytorch_csv.h).
template <class S>
std::string file_form(const S& s, const Options& o) {
  return o.format == "pytorch-csv" ? bp::format_pytorch_csv(s) : bp::format_schedule_text(s);
}

// One schedule's report: placement, grid, busy and idle; its row of the table; its timeline.
// With `lowered`, the lowered lists are what is drawn and simulated.
struct Report {
  std::string table;
  std::vector<bp::Timeline> timelines;
};

// Its report goes to `out`; its trace file is written whatever `out` is.
void simulate_one(const bp::Schedule& s, const bp::LoweredSchedule* lowered, const Options& o,
                  const bp::StageCost& share, double comm, bool one_of_many, Report& report,
                  std::ostream& out) {
  const bp::CostModel costs = cost_model(s, share, comm, o.device_weights);
  const bp::Simulation sim = lowered ? bp::simulate(*lowered, costs) : bp::simulate(s, costs);
  // Within the memory the schedule holds, no order of its actions ends sooner.
  const bp::MakespanBound bound = bp::makespan_lower_bound(s, costs);
  const double gap = bound.makespan > 0 ? sim.stats.makespan / bound.makespan - 1 : 0;

  out << "== " << s.name << " (p=" << s.devices << ", v=" << s.chunks
      << ", m=" << s.microbatches;
  if (s.batch_units > 1) out << " carrying " << s.batch_units << " micro-batches";
  out << (lowered ? ", lowered" : "") << ")\n" << bp::format_placement(s) << "\n";
  if (!o.quiet_grid) out << (lowered ? bp::format_grid(*lowered) : bp::format_grid(s));

  std::vector<std::string> busy, idle, in_flight, bytes;
  for (const bp::DeviceStats& d : sim.stats.devices) {
    busy.push_back(fmt("%g", d.busy));
    idle.push_back(fmt("%g", d.idle));
    in_flight.push_back(std::to_string(d.peak_in_flight));
    bytes.push_back(fmt("%g", d.peak_activation_bytes));
  }
  out << "busy per device: " << join(busy, " ") << "; idle: " << join(idle, " ")
      << "\nlower bound " << fmt("%.2f", bound.makespan) << fmt(" (gap %.1f %%), ", 100 * gap)
      << bound.why << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %2d %2d %3d %9.2f %8.2f %6.1f %9.1f %9.1f  %-22s %s\n",
                s.name.c_str(), s.devices, s.chunks, s.microbatches * s.batch_units,
                sim.stats.makespan, bound.makespan, 100 * gap, 100 * sim.stats.bubble_fraction,
                100 * sim.stats.bubble_inside_fraction, join(in_flight, " ").c_str(),
                join(bytes, " ").c_str());
  report.table += line;

  bp::Timeline t = sim.timeline;
  t.title = s.name + fmt(":  makespan %.2f", sim.stats.makespan) +
            fmt(", bubble %.1f%%", 100 * sim.stats.bubble_fraction);
  if (!o.trace.empty())
    brigade::write_whole_file(one_of_many ? with_suffix(o.trace, s.name) : o.trace,
                              bp::chrome_trace_json(t) + "\n");
  report.timelines.push_back(std::move(t));
}

// Each weight a positive number of at most kMostCost (0 or less is no device's speed).
void check_device_weights(const std::vector<double>& weights) {
  for (double w : weights)
    if (!std::isfinite(w) || w <= 0 || w > kMostCost)
      throw brigade::cli::UsageError("--device-weights: " + fmt("%g", w) +
                                     " is not a number above 0 and at most 1e15");
}

// The schedules to report: the file's, or the generators' by name.
int run(const Options& o) {
  double comm = 0;
  const bp::StageCost share = parse_cost(o.cost, comm);
  check_device_weights(o.device_weights);
  if (!o.svg.empty()) brigade::cli::check_output_file("--svg", o.svg);
  if (!o.trace.empty()) brigade::cli::check_output_file("--trace", o.trace);  // FILE-NAME beside
  Report report;
  // --print-schedule: stdout is the schedule's file form alone, a file to redirect, and the
  // run stops there unless --svg or --trace asks for the simulation's pictures: then the
  // simulation runs as without it, its report unprinted and its "wrote" lines on stderr.
  const bool draws = !o.svg.empty() || !o.trace.empty();
  std::ostringstream unprinted;
  std::ostream& out = o.print_schedule ? static_cast<std::ostream&>(unprinted) : std::cout;
  std::ostream& said = o.print_schedule ? std::cerr : std::cout;
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %2s %2s %3s %9s %8s %6s %9s %9s  %-22s %s\n",
                "schedule", "p", "v", "m", "makespan", "bound", "gap %", "bubble %", "inside %",
                "peak in-flight/device",
                "peak activation/device");
  report.table += line;

  std::vector<std::string> names;
  if (o.schedule_file.empty())
    names = o.schedule == "all" ? bp::schedule_names() : split(o.schedule);
  if (o.schedule_file.empty() && names.empty())
    throw brigade::cli::UsageError("--schedule: name a schedule, several joined by commas, or all");
  const std::vector<std::string> known = bp::schedule_names();
  for (const std::string& name : names)  // all of them, before the first is simulated
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw brigade::cli::UsageError("--schedule: unknown schedule '" + name + "'; known: " +
                                     join(known, " "));
  if (o.print_schedule && o.schedule_file.empty() && names.size() != 1)
    throw brigade::cli::UsageError("--print-schedule writes one schedule: name it with --schedule");

  if (!o.schedule_file.empty()) {
    const bp::LoweredSchedule lowered = bp::load_schedule(o.schedule_file, o.max_live);
    if (o.print_schedule) {  // as written (compute-only or lowered), or lowered if asked
      const bool lowered_form = o.lowered || bp::read_schedule_file(o.schedule_file).lowered();
      std::cout << (lowered_form ? file_form(lowered, o) : file_form(bp::compute_only(lowered), o));
      if (!draws) return 0;
    }
    simulate_one(bp::compute_only(lowered), &lowered, o, share, comm, false, report, out);
  }
  // --chunks is for the schedules that take any v; the V shapes have two, the others one.
  const auto chunks_of = [&](const std::string& name) {
    if (bp::placement_of(name) == bp::Placement::v_shape) return 2;
    return bp::default_chunks(name) > 1 ? o.chunks : 1;
  };
  // Why each schedule cannot be made for these counts, found before any is simulated: named
  // alone or in a list, that is the command's refusal; under all, its row says it.
  std::map<std::string, std::string> cannot;
  for (const std::string& name : names) {
    const int v = chunks_of(name);
    std::string why;
    if (int64_t{o.devices} * v * o.microbatches > kMostStageMicrobatches) {
      why = name + ": " + std::to_string(o.devices) + " stages x " + std::to_string(v) +
            (v == 1 ? " chunk x " : " chunks x ") + std::to_string(o.microbatches) +
            " micro-batches is over 2^20 (stage, micro-batch) pairs, the most this tool " +
            "simulates in seconds";
    } else {
      try {
        bp::make_schedule(name, o.devices, o.microbatches, v);
      } catch (const std::invalid_argument& e) {
        why = e.what();
      }
    }
    if (why.empty()) continue;
    if (o.schedule != "all") throw brigade::cli::UsageError(why);
    cannot[name] = why;
  }
  // Under all, a schedule that cannot be made for these counts, or not within --max-live, is a
  // row that says why, in the first line of it (the second draws where); the others still run.
  const auto skip = [&](const std::string& name, const std::string& why) {
    std::snprintf(line, sizeof line, "%-17s ", name.c_str());
    report.table += std::string(line) + "skipped: " + why.substr(0, why.find('\n')) + "\n";
  };
  for (const std::string& name : names) {
    if (cannot.count(name)) {
      skip(name, cannot.at(name));
      continue;
    }
    const int v = chunks_of(name);
    bp::Schedule s = bp::make_schedule(name, o.devices, o.microbatches, v);
    if (bp::schedule_kind(name).needs_costs)  // planned for the costs given, not unit ones
      s = bp::make_schedule(name, o.devices, o.microbatches, v,
                            cost_model(s, share, comm, o.device_weights));
    bp::validate(s);
    const bp::LoweredSchedule lowered = bp::lower(s);
    try {
      if (o.lowered || o.max_live) bp::validate(lowered, o.max_live);
    } catch (const bp::ScheduleError& e) {  // over --max-live: under all, the others still run
      if (o.schedule != "all" || !o.max_live) throw;
      skip(name, e.what());
      continue;
    }
    if (o.print_schedule) {
      std::cout << (o.lowered ? file_form(lowered, o) : file_form(s, o));
      if (!draws) return 0;
    }
    simulate_one(s, o.lowered ? &lowered : nullptr, o, share, comm, names.size() > 1, report,
                 out);
  }

  out << "costs per device share: " << o.cost << " (a chunk costs 1/v of it)\n" << report.table;
  if (!o.svg.empty()) {
    brigade::write_whole_file(o.svg, bp::timeline_svg(report.timelines));
    said << "wrote " << o.svg << "\n";
  }
  if (!o.trace.empty())
    said << "wrote Chrome trace" << (names.size() > 1 ? "s " + with_suffix(o.trace, "NAME")
                                                      : " " + o.trace)
         << " (open in https://ui.perfetto.dev)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"brigade-simulate: generate, validate, simulate and draw pipeline schedules"};
  brigade::cli::show_defaults(app);
  Options o;
  auto* name = app.add_option(
      "--schedule", o.schedule,
      "a schedule (naive, gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-auto, "
      "interleaved-zb, zb-v, v-half, v-min, dualpipe-v), several joined by commas, or all");
  auto* stages =
      app.add_option("--stages", o.devices, "pipeline devices p, one stage each")
          ->check(CLI::Range(1, 1 << 16));
  auto* micro =
      app.add_option("--microbatches", o.microbatches, "micro-batches m per step")
          ->check(CLI::Range(1, 1 << 16));
  app.add_option("--chunks", o.chunks,
                 "chunks per device v for interleaved-1f1b, looped-bfs and interleaved-zb "
                 "(the V shapes have 2)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--cost", o.cost, "device-share costs: f=1,b=1,w=1,comm=0[,act=1]");
  app.add_option("--device-weights", o.device_weights, "cost multiplier per device, e.g. 1,1,2,1")
      ->default_str("1 each")
      ->delimiter(',');
  app.add_option("--svg", o.svg, "write an SVG timeline (all schedules stacked)")
      ->default_str(brigade::cli::kNotGiven);
  app.add_option("--trace", o.trace, "write a Chrome-trace JSON (one per schedule with 'all')")
      ->default_str(brigade::cli::kNotGiven);
  app.add_flag("--no-grid", o.quiet_grid, "do not print the dry-run grids");
  app.add_flag("--lowered", o.lowered,
               "with sends and receives: print, draw and simulate the lowered lists");
  auto* print = app.add_flag(
      "--print-schedule", o.print_schedule,
      "write the schedule in the file form (pipeline/schedule/schedule_text.h) on stdout and "
      "stop; with --svg or --trace, also simulate it to write them (their lines on stderr)");
  app.add_option("--format", o.format,
                 "with --print-schedule: brigade or pytorch-csv, the CSV "
                 "torch.distributed.pipelining loads and dumps (compute-only; with --lowered, "
                 "its compute_comms form)")
      ->check(CLI::IsMember({"brigade", "pytorch-csv"}))
      ->needs(print);
  auto* file = app.add_option("--schedule-file", o.schedule_file,
                              "read the schedule from FILE (its header says p, v and m; a "
                              "FILE.csv is PyTorch's schedule CSV, which says them by itself)")
                  ->default_str(brigade::cli::kNotGiven);
  app.add_option("--max-live", o.max_live,
                 "refuse lowered lists where a device holds more live activations")
      ->default_str("no bound")
      ->check(CLI::Range(1, 1 << 30));
  file->excludes(name)->excludes(stages)->excludes(micro);  // the file's header says them
  if (const auto status = brigade::cli::parse_or_exit_status(app, argc, argv, "brigade-simulate"))
    return *status;
  try {
    return run(o);
  } catch (const brigade::cli::UsageError& e) {
    std::cerr << "brigade-simulate: " << e.what() << "\n";
    return brigade::cli::kUsageStatus;
  } catch (const std::exception& e) {
    std::cerr << "brigade-simulate: " << e.what() << "\n";
    return 1;
  }
}

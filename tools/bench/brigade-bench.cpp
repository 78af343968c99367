// brigade-bench: how fast Brigade's kernels and training are, as fractions of this machine's
// measured peak. Not a test: it measures, prints tables, and writes JSON (--json).
//
//   brigade-bench                      # peak, every op, the model at batch 32/128/512, 1 and 2 threads
//   brigade-bench --quick              # the same, smaller: about a minute
//   brigade-bench --level ops --impls cpu --threads 1 --batch 128
//   brigade-bench --level model --batches 128 --threads 1,2 --json bench.json
//   brigade-bench --level runtime --cuda-graphs on,off   # steps as brigade-train runs them
//   brigade-bench --model tools/models/tiny_cnn.model --quick   # another model: NAME or FILE
//   brigade-bench --level gemm --batch 128   # the bf16 GEMM beside SGEMM at the layers' shapes
//   brigade-bench --devices cuda:0 --count-calls   # emulated GPUs: the calls of a step, counted
//   brigade-bench --level model --math tf32        # cuBLAS and cuDNN on tensor cores (TF32)
//   brigade-bench --level both --threads 1 --precision fp32,bf16   # the CPU in fp32 and bf16
//
// Reading order: timing.h (median of repetitions), peak.h (the yardstick), op_bench.h (each op
// per implementation), model_bench.h (samples/s of a training step), one_stage_run.h and
// runtime_bench.h (the same through the pipeline runtime, as brigade-train steps it),
// gemm_bf16_bench.h (the bf16 GEMM against SGEMM), call_count_bench.h (the calls a GPU step
// makes, on emulated GPUs), passes.h (a level's rows per precision and per part), report.h
// (each level's table and JSON rows), then this file: the command line, checked, and the
// levels asked for, measured in order.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "kernels/precision.h"
#include "layers/model/model_file.h"
#include "tools/bench/call_count_bench.h"
#include "tools/bench/gemm_bf16_bench.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/op_bench.h"
#include "tools/bench/passes.h"
#include "tools/bench/peak.h"
#include "tools/bench/report.h"
#include "tools/bench/runtime_bench.h"
#include "tools/command_line.h"
#include "tools/models/find_model.h"

using namespace brigade;
using namespace brigade::bench;
using nlohmann::json;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// brigade-bench --count-calls: what cannot be counted here is said in one line, status 2.
// One pass per precision named, as the timed levels do, and in it one per graphs setting.
int count_calls_and_print(const model::ModelSpec& spec, const std::string& model_name,
                          const std::string& device_list, CallCountOptions o,
                          const std::vector<bool>& cuda_graphs,
                          const std::vector<std::string>& precisions,
                          const std::string& json_path) {
  const auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "brigade-bench: %s\n", why.c_str());
    return cli::kUsageStatus;
  };
  if (!call_counting_built())
    return refuse("--count-calls needs a build on emulated GPUs (meson setup build-emu "
                  "-Dcuda=emulated): only the emulated CUDA runtime counts the calls it is "
                  "given; NVIDIA's does not, and this build runs on NVIDIA's or on no GPU");
  try {
    o.devices = Device::parse_list(device_list);
  } catch (const Error& e) {
    return refuse(std::string("--devices: ") + e.what());
  }
  for (const Device& d : o.devices)
    if (!d.is_cuda())
      return refuse("--count-calls counts the calls of a GPU's training step, and --devices names " +
                    d.str() + " (e.g. --devices cuda:0)");
  for (const std::string& impl : o.impls)
    if (impl != "handwritten" && impl != "vendor")
      return refuse("--count-calls counts the CUDA paths, and --impls names " + impl +
                    " (--impls handwritten, vendor or both)");
  nlohmann::json out;
  try {
    const auto count_in = [&](Precision) {
      std::vector<CallCountRow> rows;
      for (const bool graphs : cuda_graphs) {
        o.cuda_graphs = graphs;
        for (CallCountRow& r : count_calls(spec, o)) rows.push_back(std::move(r));
      }
      return rows;
    };
    print_call_counts(in_each_precision(precisions, count_in), model_name, o, &out);
    write_json_if_asked(out, json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Why --math `math` cannot run here ("" when it can): tf32 is cuBLAS's and cuDNN's on a GPU
// (kernels/math_mode.h), so it needs one, and the vendor rows among those measured (when a
// level that reads --impls is asked for).
std::string math_refusal(const std::string& math, bool count_calls, bool impls_read,
                         bool impls_given, const std::vector<std::string>& impls) {
  if (math == "fp32") return "";
  if (count_calls)
    return "--count-calls counts the same calls in either math mode (a cuBLAS handle's mode is "
           "set once, when it is made); leave --math out";
  if (cuda_device_count() == 0)
    return "tf32 is cuBLAS's and cuDNN's on tensor cores, and this machine has no GPU (the CPU "
           "computes fp32 only)";
  if (impls_read && impls_given && std::find(impls.begin(), impls.end(), "vendor") == impls.end())
    return "tf32 is the vendor rows' (cuBLAS, cuDNN), and --impls measures none: add vendor";
  return "";
}

// Why an option given on the command line would change nothing in this run ("" when each one
// given does): a table made without it would read as made with it. --count-calls counts one
// GPU step instead of timing levels; --impls picks the rows of the ops, model and runtime
// levels (the reference kernels are the op level's alone); --cuda-graphs is the runtime's;
// each level has its own sizes (--batch, --batches and --steps) and --precision is the ops,
// model and runtime levels' (the gemm level times bf16 beside fp32 itself).
std::string unread_option_refusal(const CLI::App& app, bool count, bool run_ops, bool run_steps,
                                  bool run_runtime, bool run_gemm,
                                  const std::vector<std::string>& impls) {
  if (count) {
    static const std::pair<const char*, const char*> timing_only[] = {
        {"--level", "chooses what is timed, and --count-calls counts a GPU step's calls "
                    "instead of timing; leave one of them out"},
        {"--threads", "sets the CPU's thread counts, and --count-calls counts a GPU's step; "
                      "leave it out"},
        {"--reps", "repeats a timing for its median, and --count-calls' counts are exact, the "
                   "same every time (--steps sets the steps counted); leave it out"},
        {"--batch", "is the op and gemm levels' batch; --count-calls counts at --batches"}};
    for (const auto& [flag, why] : timing_only)
      if (app.count(flag)) return std::string(flag) + " " + why;
    return "";
  }
  if (app.count("--impls"))
    for (const std::string& impl : impls) {
      if (run_ops || (run_steps && impl != "reference")) continue;
      if (run_steps)
        return "--impls reference: the reference kernels are timed op by op, at the op level "
               "(--level ops or both) alone";
      return "--impls " + impl + ": --level gemm times the CPU's bf16 GEMM beside OpenBLAS's "
             "SGEMM, no implementation of --impls (the ops, model and runtime levels' rows); "
             "leave it out";
    }
  // The model and runtime levels time whole steps, on the CPU or a CUDA path: a list of the
  // reference alone leaves them no row, a table of headers that would exit 0.
  const auto reference = [](const std::string& impl) { return impl == "reference"; };
  if (app.count("--impls") && run_steps && std::all_of(impls.begin(), impls.end(), reference))
    return "--impls reference: the model and runtime levels time steps on cpu, handwritten or "
           "vendor, and the reference kernels op by op alone; add one of those, or ask for "
           "--level ops";
  const bool run_rows = run_ops || run_steps;
  const struct {
    const char* flag;
    bool read;
    const char* why;
  } level_settings[] = {
      {"--batch", run_ops || run_gemm,
       "is the ops and gemm levels' batch, and neither is asked for (the model and runtime "
       "levels take --batches)"},
      {"--batches", run_steps,
       "are the model and runtime levels' batches, and neither is asked for (the ops and gemm "
       "levels take --batch)"},
      {"--steps", run_steps,
       "are the model and runtime levels' steps per repetition, and neither is asked for"},
      {"--precision", run_rows,
       "is the ops, model and runtime levels' (--level gemm times bf16 beside fp32 itself); "
       "leave it out"},
  };
  for (const auto& s : level_settings)
    if (app.count(s.flag) && !s.read) return std::string(s.flag) + " " + s.why;
  // Graphs are the runtime's: the other levels call the ops without it, so a table that
  // looks measured with graphs off would not be.
  if (app.count("--cuda-graphs") && !run_runtime)
    return "--cuda-graphs applies to the runtime level (--level runtime) and to --count-calls; "
           "the levels asked for call the ops without the runtime, so without graphs";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Brigade's op and training throughput against this machine's measured peak"};
  cli::show_defaults(app);
  std::string model_name = "seed_cnn", json_path;
  std::vector<std::string> levels = {"both"};
  bool quick = false;
  OpBenchOptions op;
  ModelBenchOptions mo;
  std::vector<int> threads = {1, 2};
  int reps = 5;
  app.add_option("--model", model_name,
                 "model whose layers and training step are measured: NAME "
                 "(tools/models/NAME.model) or a model FILE, as brigade-train's --model");
  app.add_option("--level", levels,
                 "what to measure, one or several: ops (each layer's kernels), model (training "
                 "steps of the whole model in a plain loop), both (ops and model), runtime "
                 "(training steps through the pipeline runtime, as brigade-train on one device), "
                 "or gemm (the bf16 GEMM beside SGEMM at the layers' GEMM shapes, one thread, "
                 "--batch); not with --count-calls, which counts instead of timing")
      ->delimiter(',')
      ->check(CLI::IsMember({"ops", "model", "both", "runtime", "gemm"}));
  app.add_flag("--quick", quick,
               "where not given: at most 3 repetitions and 2 steps, --batches 128; the reference "
               "on batch 2");
  app.add_option("--batch", op.batch, "op and gemm levels: batch")->check(CLI::Range(1, 4096));
  app.add_option("--batches", mo.batches, "model and runtime levels and --count-calls: batches")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--threads", threads, "CPU thread counts (not with --count-calls)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  app.add_option("--impls", op.impls, "the rows of the ops, model and runtime levels and the "
                 "paths --count-calls counts: reference (op level only),cpu,handwritten,vendor "
                 "(the CUDA two only where a GPU is)")
      ->delimiter(',')->check(CLI::IsMember({"reference", "cpu", "handwritten", "vendor"}));
  app.add_option("--reps", reps, "repetitions (the median is reported; not with --count-calls)")
      ->check(CLI::Range(1, 100));
  app.add_option("--steps", mo.steps, "model and runtime levels: steps per repetition; "
                 "--count-calls: steps counted (default 2)")->check(CLI::Range(1, 1000));
  app.add_option("--json", json_path, "also write every figure to this JSON file")
      ->default_str(cli::kNotGiven);
  bool count = false;
  std::string devices = "cuda:0";
  app.add_flag("--count-calls", count,
               "instead of timing: count the CUDA calls of a training step (kernel launches, "
               "library calls, graph launches, host-blocking calls, the top entry points) on "
               "each of --devices, both CUDA paths (or those of --impls), at --batches (default "
               "128); needs a build on emulated GPUs (-Dcuda=emulated)");
  app.add_option("--devices", devices, "--count-calls: the GPUs counted, e.g. cuda:0 or "
                 "cuda:0,cuda:1")->needs("--count-calls");
  std::vector<std::string> cuda_graphs = {"on"};
  app.add_option("--cuda-graphs", cuda_graphs,
                 "the runtime level's GPU rows and --count-calls: on (the step replayed as CUDA "
                 "graphs, each compute action's and each stage's update's, as brigade-train does "
                 "by default; measured after the steps that size and capture them), off (every "
                 "launch issued by the host), or on,off (a row of each)")
      ->delimiter(',')
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  std::string math = "fp32";
  app.add_option("--math", math,
                 "arithmetic of the vendor rows (cuBLAS, cuDNN) and of the GPU's SGEMM peak: "
                 "fp32, or tf32 (tensor cores, inputs rounded to 10 mantissa bits); the CPU and "
                 "hand-written rows are fp32 either way. tf32 needs a GPU")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  std::vector<std::string> precisions = {"fp32"};
  app.add_option("--precision", precisions,
                 "precisions of Dense and Conv2D measured, one pass each, side by side: fp32, "
                 "bf16 (operands rounded to bfloat16, sums in fp32; every row but the reference's), "
                 "or fp32,bf16")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16"}));
  if (const auto status = cli::parse_or_exit_status(app, argc, argv, "brigade-bench"))
    return *status;
  if (!json_path.empty()) {  // before minutes of measurement, not after them
    try {
      cli::check_output_file("--json", json_path);
    } catch (const cli::UsageError& e) {
      std::fprintf(stderr, "brigade-bench: %s\n", e.what());
      return cli::kUsageStatus;
    }
  }
  if (quick) {  // fewer repetitions, steps and batches, where not given
    if (app.count("--reps") == 0) reps = std::min(reps, 3);
    op.warmup = 1, op.reference_batch = 2, op.min_repetition_s = 0.02;
    if (app.count("--batches") == 0) mo.batches = {128};
    mo.warmup = 1;
    if (app.count("--steps") == 0) mo.steps = std::min(mo.steps, 2);
  }
  const auto asked = [&](const char* level) {
    return std::find(levels.begin(), levels.end(), level) != levels.end();
  };
  op.repetitions = mo.repetitions = reps;
  op.threads = mo.threads = threads;
  const bool run_ops = asked("ops") || asked("both"), run_model = asked("model") || asked("both");
  const bool run_runtime = asked("runtime"), run_gemm = asked("gemm");
  // The model and runtime levels' steps, on the CPU and each CUDA path (in_parts).
  const bool run_steps = run_model || run_runtime;
  std::vector<bool> graphs_settings;
  for (const std::string& g : cuda_graphs) graphs_settings.push_back(g == "on");
  if (const std::string why =
          unread_option_refusal(app, count, run_ops, run_steps, run_runtime, run_gemm, op.impls);
      !why.empty()) {
    std::fprintf(stderr, "brigade-bench: %s\n", why.c_str());
    return cli::kUsageStatus;
  }
  if (app.count("--impls")) {  // the rows of the model and runtime levels too
    mo.cpu = std::find(op.impls.begin(), op.impls.end(), "cpu") != op.impls.end();
    std::erase_if(mo.cuda_impls, [&](const std::string& impl) {
      return std::find(op.impls.begin(), op.impls.end(), impl) == op.impls.end();
    });
  }
  // The CUDA implementations asked for by name on a machine without a GPU: an empty table that
  // exits 0 would look like a result. By default they are skipped quietly. (--count-calls,
  // which counts the CUDA paths alone, says it needs a GPU in its own words.)
  if (app.count("--impls") && (run_ops || run_steps) && !count && cuda_device_count() == 0)
    for (const std::string& impl : op.impls)
      if (impl == "handwritten" || impl == "vendor") {
        std::fprintf(stderr, "brigade-bench: --impls %s needs a CUDA device, and this machine "
                     "has none (%s; here: --impls reference,cpu)\n", impl.c_str(),
                     no_gpu_reason().c_str());
        return cli::kUsageStatus;
      }

  if (const std::string why =
          math_refusal(math, count, run_ops || run_steps, app.count("--impls") > 0, op.impls);
      !why.empty()) {
    std::fprintf(stderr, "brigade-bench: --math %s: %s\n", math.c_str(), why.c_str());
    return cli::kUsageStatus;
  }
  op.math = mo.math = parse_math_mode(math);

  const std::optional<model::ModelSpec> model_spec =
      models::load_model_or_say_why(model_name, BRIGADE_MODELS_DIR, "brigade-bench");
  if (!model_spec) return cli::kUsageStatus;
  const model::ModelSpec& spec = *model_spec;
  if (count) {
    CallCountOptions co;
    if (app.count("--impls")) co.impls = op.impls;
    if (app.count("--batches")) co.batches = mo.batches;
    if (app.count("--steps")) co.steps = mo.steps;
    return count_calls_and_print(spec, model_name, devices, co, graphs_settings, precisions,
                                 json_path);
  }
  try {
    const int gpus = cuda_device_count();
    std::printf("brigade-bench: %s, %u hardware threads, %d GPU(s); model %s%s\n",
                cpu_model().c_str(), std::thread::hardware_concurrency(), gpus, model_name.c_str(),
                op.math == MathMode::tf32 ? "; math tf32 (the vendor rows and the GPU peak)" : "");

    // The yardstick: the peak on each thread count, on the same kind of pool the kernels use.
    std::map<int, Peak> peaks;
    for (int t : threads) {
      configure_cpu_device(op.cpu_device, {.threads = t});
      peaks[t] = measure_peak(cpu_thread_pool(Device::cpu(op.cpu_device)), quick);
    }
    // The GPU's yardstick: an SGEMM large enough to reach the peak, or with --quick a smaller
    // one (1024^3 under-reads a large GPU's peak, but takes a moment on any GPU). An emulated
    // GPU (-Dcuda=emulated) computes at the emulator's speed, about 1 GFLOP/s, whatever the
    // size: 256^3 measures that as well, where 8192^3 would take hours and 1024^3 seconds.
#if defined(BRIGADE_CUDA_EMULATED)
    const int gpu_peak_n = 256;
#else
    const int gpu_peak_n = quick ? 1024 : 8192;
#endif
    std::vector<std::string> failures;  // what failed and was left out; the rest is measured
    double gpu_peak = 0;  // 0: none (no GPU, or its measurement failed)
    if (gpus > 0) try {
        gpu_peak = gpu_sgemm_peak_gflops(gpu_peak_n, reps, op.math);
      } catch (const std::exception& e) {
        failures.push_back(std::string("the GPU's SGEMM peak: ") + e.what());
        std::fprintf(stderr, "brigade-bench: %s\n", failures.back().c_str());
      }
    json out;
    print_peaks(peaks, gpus, gpu_peak, gpu_peak_n, &out);
    out["machine"] = {{"cpu", cpu_model()}, {"hardware_threads", std::thread::hardware_concurrency()},
                      {"gpus", gpus}};
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
    out["command"] = cmd;
    out["math"] = math;  // the vendor rows' and the GPU peak's; the others' is fp32
    out["model_file"] = models::find_model(model_name, BRIGADE_MODELS_DIR);  // the file measured

    if (run_ops) {
      std::fprintf(stderr, "op level:\n");
      const std::vector<OpRow> rows = in_each_precision(
          precisions, [&](Precision p) { return bench_ops(spec, for_precision(op, p)); });
      print_op_rows(rows, peaks, gpu_peak, &out);
    }
    if (run_model) {
      std::fprintf(stderr, "model level:\n");
      const std::vector<ModelRow> rows = in_each_precision(precisions, [&](Precision) {
        return in_parts(mo, "model", &failures,
                        [&](const ModelBenchOptions& part) { return bench_model(spec, part); });
      });
      print_model_rows(rows, model_name, spec, peaks, gpu_peak, &out);
    }
    if (run_runtime) {
      std::fprintf(stderr, "runtime level:\n");
      RuntimeBenchOptions ro;
      ro.batches = mo.batches, ro.threads = mo.threads, ro.math = mo.math;
      ro.cpu = mo.cpu, ro.cuda_impls = mo.cuda_impls;
      ro.warmup = mo.warmup, ro.repetitions = mo.repetitions, ro.steps = mo.steps;
      ro.seed = mo.seed, ro.cuda_graphs = graphs_settings;
      const std::vector<RuntimeRow> rows = in_each_precision(precisions, [&](Precision) {
        return in_parts(ro, "runtime", &failures,
                        [&](const RuntimeBenchOptions& part) { return bench_runtime(spec, part); });
      });
      print_runtime_rows(rows, model_name, spec, peaks, gpu_peak, &out);
    }
    if (run_gemm) {
      std::fprintf(stderr, "gemm level:\n");
      const std::vector<GemmRow> rows = bench_gemm_bf16(spec, op.batch, reps);
      print_gemm_rows(rows, op.batch, &out);
    }
    for (const std::string& f : failures) out["failures"].push_back(f);
    write_json_if_asked(out, json_path);
    if (!failures.empty()) {
      std::fprintf(stderr, "brigade-bench: %zu part(s) failed, the rest measured:\n",
                   failures.size());
      for (const std::string& f : failures) std::fprintf(stderr, "  %s\n", f.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brigade-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

// How brigade-bench shows what it measured: each level's rows as a table on stdout and as the
// JSON rows of --json (one key per level: "peak", "ops", "model", "runtime", "gemm", "calls"),
// and the JSON file written. brigade-bench.cpp measures the levels and hands their rows here.
#include "tools/bench/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/output_file.h"
#include "kernels/cpu/cpu_isa.h"

namespace brigade::bench {
namespace {

double fraction(double gflops, double peak) { return peak > 0 ? gflops / peak : 0; }

double peak_of(const std::map<int, Peak>& peaks, double gpu_peak, const std::string& device,
               int threads) {
  if (device.rfind("cuda", 0) == 0) return gpu_peak;
  const auto it = peaks.find(threads);
  return it == peaks.end() ? 0 : it->second.fma_gflops;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

void print_peaks(const std::map<int, Peak>& peaks, int gpus, double gpu_peak, int gpu_peak_n,
                 nlohmann::json* out) {
  std::printf("\nMeasured peak (every thread at once; median of repetitions)\n");
  std::printf("%7s  %-9s %14s %16s\n", "threads", "isa", "FMA GFLOP/s", "SGEMM GFLOP/s");
  for (const auto& [t, p] : peaks)
    std::printf("%7d  %-9s %14.1f %11.1f (n=%d)\n", t, p.isa.c_str(), p.fma_gflops,
                p.sgemm_gflops, p.sgemm_n);
  if (gpu_peak > 0)
    std::printf("cuda:0 cuBLAS SGEMM %d^3: %.1f GFLOP/s\n", gpu_peak_n,
                gpu_peak);
  for (const auto& [t, p] : peaks)
    (*out)["peak"].push_back({{"threads", t}, {"isa", p.isa}, {"fma_gflops", p.fma_gflops},
                              {"sgemm_gflops", p.sgemm_gflops}, {"sgemm_n", p.sgemm_n}});
  if (gpus > 0)
    (*out)["gpu_peak_sgemm_gflops"] = gpu_peak, (*out)["gpu_peak_sgemm_n"] = gpu_peak_n;
}

void print_op_rows(const std::vector<OpRow>& rows, const std::map<int, Peak>& peaks,
                   double gpu_peak, nlohmann::json* out) {
  std::printf("\nOp level (median ms per call; %%peak = GFLOP/s / FMA peak of the same threads,"
              " or / cuBLAS SGEMM on a GPU;\nconv GFLOP/s count a direct convolution's"
              " multiply-adds: Winograd does 2.25x fewer, so it can pass 100 %%)\n");
  std::printf("%-10s %-16s %-12s %-4s %3s %5s  %-38s %10s %9s %6s\n", "layer", "op", "impl",
              "prec", "thr", "batch", "shape", "ms", "GFLOP/s", "%peak");
  for (const OpRow& r : rows) {
    const double f = fraction(r.gflops, peak_of(peaks, gpu_peak, r.device, r.threads));
    std::printf("%-10s %-16s %-12s %-4s %3d %5lld  %-38s %10.3f %9.2f %6.1f\n",
                r.layer.c_str(), r.op.c_str(), r.impl.c_str(), r.precision.c_str(), r.threads,
                static_cast<long long>(r.batch), r.shape.c_str(), r.ms, r.gflops, 100 * f);
    (*out)["ops"].push_back({{"layer", r.layer}, {"op", r.op}, {"impl", r.impl},
                             {"precision", r.precision},
                             {"device", r.device}, {"threads", r.threads}, {"batch", r.batch},
                             {"shape", r.shape}, {"flops", r.flops}, {"ms", r.ms},
                             {"cpu_ms", r.cpu_ms}, {"gflops", r.gflops},
                             {"fraction_of_peak", f}});
  }
}

void print_model_rows(const std::vector<ModelRow>& rows, const std::string& model_name,
                      const model::ModelSpec& spec, const std::map<int, Peak>& peaks,
                      double gpu_peak, nlohmann::json* out) {
  std::printf("\nModel level: training steps of %s on one device (SGD momentum; %.1f MFLOP per"
              " sample)\n", model_name.c_str(), training_flops_per_sample(spec) * 1e-6);
  std::printf("%-7s %-12s %-4s %3s %6s %10s %11s %9s %6s\n", "device", "impl", "prec", "thr",
              "batch", "step ms", "samples/s", "GFLOP/s", "%peak");
  for (const ModelRow& r : rows) {
    const double f = fraction(r.gflops, peak_of(peaks, gpu_peak, r.device, r.threads));
    std::printf("%-7s %-12s %-4s %3d %6lld %10.2f %11.1f %9.2f %6.1f\n", r.device.c_str(),
                r.impl.c_str(), r.precision.c_str(), r.threads,
                static_cast<long long>(r.batch), r.step_ms, r.samples_per_s, r.gflops,
                100 * f);
    (*out)["model"].push_back({{"device", r.device}, {"impl", r.impl},
                               {"precision", r.precision}, {"threads", r.threads},
                               {"batch", r.batch}, {"step_ms", r.step_ms},
                               {"cpu_step_ms", r.cpu_step_ms},
                               {"samples_per_s", r.samples_per_s}, {"gflops", r.gflops},
                               {"fraction_of_peak", f}});
  }
}

void print_runtime_rows(const std::vector<RuntimeRow>& rows, const std::string& model_name,
                        const model::ModelSpec& spec, const std::map<int, Peak>& peaks,
                        double gpu_peak, nlohmann::json* out) {
  std::printf("\nRuntime level: training steps of %s through the pipeline runtime, as "
              "brigade-train on one device\n(one stage, one micro-batch, SGD momentum, steps "
              "submitted back to back; %.1f MFLOP per sample;\npeak MiB: the device's memory in "
              "use at most during a step, CUDA graphs' pools included; held MiB: in use + cached "
              "after the steps)\n",
              model_name.c_str(), training_flops_per_sample(spec) * 1e-6);
  std::printf("%-7s %-12s %-4s %3s %6s %6s %10s %11s %9s %6s %9s %9s\n", "device", "impl",
              "prec", "thr", "graphs", "batch", "step ms", "samples/s", "GFLOP/s", "%peak",
              "peak MiB", "held MiB");
  for (const RuntimeRow& r : rows) {
    const double f = fraction(r.gflops, peak_of(peaks, gpu_peak, r.device, r.threads));
    const char* graphs = !r.cuda_graphs ? "-" : *r.cuda_graphs ? "on" : "off";
    std::printf("%-7s %-12s %-4s %3d %6s %6lld %10.2f %11.1f %9.2f %6.1f %9.1f %9.1f\n",
                r.device.c_str(), r.impl.c_str(), r.precision.c_str(), r.threads, graphs,
                static_cast<long long>(r.batch), r.step_ms, r.samples_per_s, r.gflops, 100 * f,
                mib(r.peak_bytes), mib(r.reserved_bytes));
    (*out)["runtime"].push_back(
        {{"device", r.device}, {"impl", r.impl}, {"precision", r.precision},
         {"threads", r.threads},
         {"cuda_graphs", r.cuda_graphs ? nlohmann::json(*r.cuda_graphs) : nlohmann::json()},
         {"batch", r.batch}, {"step_ms", r.step_ms}, {"cpu_step_ms", r.cpu_step_ms},
         {"samples_per_s", r.samples_per_s}, {"gflops", r.gflops}, {"fraction_of_peak", f},
         {"peak_bytes", r.peak_bytes}, {"reserved_bytes", r.reserved_bytes}});
  }
}

void print_gemm_rows(const std::vector<GemmRow>& rows, int64_t batch, nlohmann::json* out) {
  std::printf("\nGEMM level: bf16 (kernels/cpu/gemm_bf16.h, %s) beside SGEMM (OpenBLAS), one "
              "thread, batch %lld;\nmedian CPU ms of the thread per call; ratio = SGEMM time / "
              "bf16 time\n",
              cpu::use_avx512_bf16() ? "AVX-512 BF16" : "portable",
              static_cast<long long>(batch));
  std::printf("%-10s %-16s %-3s %7s %7s %7s %10s %10s %9s %9s %6s\n", "layer", "op", "lay",
              "M", "N", "K", "sgemm ms", "bf16 ms", "GFLOP/s", "bf16 GF/s", "ratio");
  double fp32_total = 0, bf16_total = 0;
  for (const GemmRow& r : rows) {
    std::printf("%-10s %-16s %-3s %7lld %7lld %7lld %10.3f %10.3f %9.2f %9.2f %6.2f\n",
                r.layer.c_str(), r.op.c_str(), r.layout.c_str(), static_cast<long long>(r.M),
                static_cast<long long>(r.N), static_cast<long long>(r.K), r.sgemm_ms,
                r.bf16_ms, r.sgemm_gflops, r.bf16_gflops, r.sgemm_ms / r.bf16_ms);
    fp32_total += r.sgemm_ms, bf16_total += r.bf16_ms;
    (*out)["gemm"].push_back({{"layer", r.layer}, {"op", r.op}, {"layout", r.layout},
                              {"M", r.M}, {"N", r.N}, {"K", r.K}, {"sgemm_ms", r.sgemm_ms},
                              {"bf16_ms", r.bf16_ms}, {"sgemm_gflops", r.sgemm_gflops},
                              {"bf16_gflops", r.bf16_gflops}});
  }
  std::printf("%-10s %-16s %-3s %7s %7s %7s %10.3f %10.3f %9s %9s %6.2f\n", "all", "", "", "",
              "", "", fp32_total, bf16_total, "", "", fp32_total / bf16_total);
}

void print_call_counts(const std::vector<CallCountRow>& rows, const std::string& model_name,
                       const CallCountOptions& o, nlohmann::json* out) {
  std::printf("\nCalls per training step of %s on emulated GPUs (one stage, one micro-batch, SGD"
              " momentum;\nthe mean of %d steps after %d warm-up, each submitted behind the one"
              " before; host-blocking:\nthe host's waits between two steps, for the step before,"
              " and inside a step)\n", model_name.c_str(), o.steps, o.warmup);
  std::printf("%-7s %-12s %4s %11s %6s %9s %9s %7s %17s %14s %7s\n", "device", "impl", "prec",
              "cuda-graphs", "batch", "launches", "library", "graphs", "launches+library",
              "host-blocking", "inside");
  for (const CallCountRow& r : rows)
    std::printf("%-7s %-12s %4s %11s %6lld %9g %9g %7g %17g %14g %7g\n", r.device.c_str(),
                r.impl.c_str(), r.precision.c_str(), r.cuda_graphs ? "on" : "off",
                static_cast<long long>(r.batch), r.kernel_launches,
                r.library_calls, r.graph_launches, r.kernel_launches + r.library_calls,
                r.host_blocking, r.host_blocking_inside);
  for (const CallCountRow& r : rows) {
    std::printf("\ntop entry points per step, %s %s %s graphs %s batch %lld:", r.device.c_str(),
                r.impl.c_str(), r.precision.c_str(), r.cuda_graphs ? "on" : "off",
                static_cast<long long>(r.batch));
    nlohmann::json top = nlohmann::json::object();
    for (const auto& [name, n] : r.top) {
      std::printf(" %s %g", name.c_str(), n);
      top[name] = n;
    }
    std::printf("\n");
    (*out)["calls"].push_back({{"device", r.device}, {"impl", r.impl},
                               {"precision", r.precision}, {"cuda_graphs", r.cuda_graphs},
                               {"batch", r.batch}, {"kernel_launches", r.kernel_launches},
                               {"library_calls", r.library_calls},
                               {"graph_launches", r.graph_launches},
                               {"host_blocking", r.host_blocking},
                               {"host_blocking_inside", r.host_blocking_inside},
                               {"top_entry_points", top}});
  }
}

void write_json_if_asked(const nlohmann::json& out, const std::string& json_path) {
  if (json_path.empty()) return;
  write_whole_file(json_path, out.dump(2) + "\n");
  std::printf("\nwrote %s\n", json_path.c_str());
}

}  // namespace brigade::bench

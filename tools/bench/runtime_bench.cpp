#include "tools/bench/runtime_bench.h"

#include <algorithm>
#include <cstdio>

#include "engine/allocator.h"
#include "engine/device.h"
#include "tools/bench/cuda_impl.h"
#include "tools/bench/one_stage_run.h"
#include "tools/bench/timing.h"

namespace brigade::bench {
namespace {

RuntimeRow run(const model::ModelSpec& spec, const Device& device, const std::string& impl,
               int threads, std::optional<bool> cuda_graphs, int64_t B,
               const RuntimeBenchOptions& o) {
  // What the rows before left cached is theirs: this row's `reserved` counts its own.
  Allocator::of(device).empty_cache();
  OneStageRun steps(spec, device, B, o.seed, cuda_graphs.value_or(false));
  for (int i = 0; i < std::max(o.warmup, 2); ++i) steps.step();
  std::vector<double> per_step, cpu_per_step;
  for (int r = 0; r < o.repetitions; ++r) {
    const double t0 = now_s(), c0 = process_cpu_s();
    for (int i = 0; i < o.steps; ++i) steps.submit();
    steps.flush();
    per_step.push_back((now_s() - t0) / o.steps);
    cpu_per_step.push_back((process_cpu_s() - c0) / o.steps);
  }
  const MemoryStats memory = Allocator::of(device).stats();  // its peak: since the last step began
  const double s = summarize(per_step).median_s;
  RuntimeRow row;
  row.device = device.str();
  row.impl = impl;
  row.threads = threads;
  row.batch = B;
  row.step_ms = s * 1e3;
  row.cpu_step_ms = summarize(cpu_per_step).median_s * 1e3;
  row.samples_per_s = static_cast<double>(B) / s;
  row.gflops = training_flops_per_sample(spec) * static_cast<double>(B) / s * 1e-9;
  row.cuda_graphs = cuda_graphs;
  row.peak_bytes = memory.peak_in_use;
  row.reserved_bytes = memory.reserved;
  std::fprintf(stderr, "  runtime %-7s %-12s %2d thr %-10s batch %4lld  %9.1f samples/s\n",
               row.device.c_str(), impl.c_str(), threads,
               !cuda_graphs ? "" : *cuda_graphs ? "graphs on" : "graphs off",
               static_cast<long long>(B), row.samples_per_s);
  return row;
}

}  // namespace

std::vector<RuntimeRow> bench_runtime(const model::ModelSpec& spec, const RuntimeBenchOptions& o) {
  std::vector<RuntimeRow> rows;
  if (o.cpu)
    for (int threads : o.threads) {
      configure_cpu_device(o.cpu_device, {.threads = threads});
      for (int64_t B : o.batches)
        rows.push_back(run(spec, Device::cpu(o.cpu_device), "cpu", threads, std::nullopt, B, o));
    }
  if (cuda_device_count() > 0)
    for (const std::string& impl : o.cuda_impls) {
      const CudaImpl measured(impl, o.math);
      for (const bool graphs : o.cuda_graphs)
        for (int64_t B : o.batches) rows.push_back(run(spec, Device::cuda(0), impl, 0, graphs, B, o));
    }
  return rows;
}

}  // namespace brigade::bench

#include "tools/bench/call_count_bench.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/error.h"
#include "kernels/cuda/path.h"
#include "kernels/precision.h"
#include "tools/bench/one_stage_run.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif

namespace brigade::bench {

#if defined(BRIGADE_CUDA_EMULATED)

bool call_counting_built() { return true; }

namespace {

CallCountRow count_one(const model::ModelSpec& spec, const Device& device, const std::string& impl,
                       int64_t batch, const CallCountOptions& o) {
  set_cuda_path(parse_cuda_path(impl));
  OneStageRun run(spec, device, batch, o.seed, o.cuda_graphs);
  // Steps are submitted as brigade-train submits them (pipeline::Runtime::submit): on the GPU's
  // verdict each returns without waiting for itself, and the next one waits once for it.
  for (int i = 0; i < o.warmup; ++i) run.step();  // nothing pending after
  // A step with none pending before it: the host's waits inside a step, alone.
  const emu::gpu::CallCounts alone = emu::gpu::call_counts();
  run.submit();
  const uint64_t inside = emu::gpu::call_counts().since(alone).host_blocking;
  // Steps each behind a pending one: the calls of a step, and its wait for the step before.
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
  for (int i = 0; i < o.steps; ++i) run.submit();
  const emu::gpu::CallCounts d = emu::gpu::call_counts().since(before);
  run.flush();

  const auto per_step = [&](uint64_t n) { return static_cast<double>(n) / o.steps; };
  CallCountRow row{.device = device.str(),
                   .impl = impl,
                   .precision = precision_name(precision()),
                   .cuda_graphs = o.cuda_graphs,
                   .batch = batch,
                   .kernel_launches = per_step(d.kernel_launches),
                   .library_calls = per_step(d.library_calls),
                   .graph_launches = per_step(d.graph_launches),
                   .host_blocking = per_step(d.host_blocking),
                   .host_blocking_inside = static_cast<double>(inside),
                   .top = {}};
  for (const auto& [name, n] : d.by_entry_point) row.top.emplace_back(name, per_step(n));
  std::stable_sort(row.top.begin(), row.top.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (row.top.size() > o.top) row.top.resize(o.top);
  std::fprintf(stderr,
               "  calls %-7s %-12s %s batch %4lld  %g launches + %g library calls per step\n",
               row.device.c_str(), impl.c_str(), row.precision.c_str(),
               static_cast<long long>(batch), row.kernel_launches, row.library_calls);
  return row;
}

}  // namespace

std::vector<CallCountRow> count_calls(const model::ModelSpec& spec, const CallCountOptions& o) {
  const int gpus = cuda_device_count();
  for (const Device& d : o.devices)
    if (!d.is_cuda() || d.index >= gpus)
      throw Error("--count-calls: " + d.str() + " is not a GPU of this machine (" +
                  std::to_string(gpus) + " emulated GPU(s): BRIGADE_EMULATED_GPUS)");
  const CudaPath before = cuda_path();
  std::vector<CallCountRow> rows;
  for (const Device& device : o.devices)
    for (const std::string& impl : o.impls)
      for (int64_t batch : o.batches) rows.push_back(count_one(spec, device, impl, batch, o));
  set_cuda_path(before);
  return rows;
}

#else

bool call_counting_built() { return false; }

std::vector<CallCountRow> count_calls(const model::ModelSpec&, const CallCountOptions&) {
  throw Error("--count-calls needs a build on emulated GPUs (meson setup build-emu "
              "-Dcuda=emulated): only the emulated CUDA runtime counts the calls it is given");
}

#endif

}  // namespace brigade::bench

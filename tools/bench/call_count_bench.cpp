#include "tools/bench/call_count_bench.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/error.h"
#include "kernels/cuda/path.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/runtime.h"
#include "tools/data/dataset.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>
#endif

namespace brigade::bench {

#if defined(BRIGADE_CUDA_EMULATED)

bool call_counting_built() { return true; }

namespace {

using pipeline::HostBatch;

// Samples [0, n) of a synthetic data set (Fashion-MNIST's shapes), as floats in [0, 1].
HostBatch synthetic_batch(int64_t n) {
  const data::Dataset ds = data::make_synthetic(data::Split::train, 3, n);
  HostBatch b;
  b.shape = Shape({n, ds.channels, ds.height, ds.width});
  for (size_t i = 0; i < ds.pixels.size(); ++i) b.x.push_back(ds.pixels[i] / 255.0f);
  b.labels.assign(ds.labels.begin(), ds.labels.end());
  return b;
}

// The batch as one micro-batch on `device`, written before this returns (the events are never
// recorded: "written already").
pipeline::StagedBatch staged_on(const Device& device, const HostBatch& b) {
  pipeline::StagedBatch staged;
  staged.inputs.push_back(Tensor::from_vector(b.x, b.shape, device));
  staged.labels.push_back(ops::labels_tensor(b.labels, Stream::default_for(device)));
  return staged;
}

CallCountRow count_one(const model::ModelSpec& spec, const Device& device, const std::string& impl,
                       int64_t batch, const CallCountOptions& o) {
  set_cuda_path(parse_cuda_path(impl));
  pipeline::PlanRequest request{.devices = {device}, .schedule = "naive"};
  const pipeline::Plan plan = pipeline::make_plan(spec, request);
  auto model = pipeline::build_model(spec, plan, o.seed);
  pipeline::Runtime runtime(
      *model, plan.devices, plan.cut, plan.lowered,
      [](std::vector<layers::Parameter*> params) {
        return std::make_unique<layers::SGD>(std::move(params),
                                             SgdParams{.lr = 0.01, .momentum = 0.9});
      },
      {.seed = o.seed, .cuda_graphs = o.cuda_graphs});
  // Staged once, before anything is counted: brigade-train's staging area fills the next batch
  // while a step runs (tools/train/staging.h), so its copies are no part of the step.
  const pipeline::StagedBatch data = staged_on(device, synthetic_batch(batch));
  // Steps are submitted as brigade-train submits them (pipeline::Runtime::submit): on the GPU's
  // verdict each returns without waiting for itself, and the next one waits once for it.
  uint32_t step = 0;
  for (int i = 0; i < o.warmup; ++i) runtime.step(data, step++);  // nothing pending after
  // A step with none pending before it: the host's waits inside a step, alone.
  const emu::gpu::CallCounts alone = emu::gpu::call_counts();
  runtime.submit(data, step++);
  const uint64_t inside = emu::gpu::call_counts().since(alone).host_blocking;
  // Steps each behind a pending one: the calls of a step, and its wait for the step before.
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
  for (int i = 0; i < o.steps; ++i) runtime.submit(data, step++);
  const emu::gpu::CallCounts d = emu::gpu::call_counts().since(before);
  runtime.flush();

  const auto per_step = [&](uint64_t n) { return static_cast<double>(n) / o.steps; };
  CallCountRow row{device.str(),
                   impl,
                   precision_name(precision()),
                   batch,
                   per_step(d.kernel_launches),
                   per_step(d.library_calls),
                   per_step(d.graph_launches),
                   per_step(d.host_blocking),
                   static_cast<double>(inside),
                   {}};
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

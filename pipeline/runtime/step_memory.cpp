#include "pipeline/runtime/step_memory.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "engine/allocator.h"
#include "kernels/ops.h"
#include "layers/sequential.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

uint64_t activation_bytes_per_sample(const model::ModelShapes& shapes, size_t begin, size_t end) {
  uint64_t sum = 0, largest = 0;
  const auto elements = [](const std::vector<int64_t>& dims) {
    uint64_t n = 1;
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n;
  };
  if (begin < end) sum = elements(shapes.layers[begin].input);
  for (size_t i = begin; i < end; ++i) {
    const uint64_t out = elements(shapes.layers[i].output);
    sum += out;
    largest = std::max(largest, out);
  }
  return 4 * (sum + largest);
}

uint64_t parameter_bytes(const model::ModelShapes& shapes, size_t begin, size_t end, int states) {
  uint64_t params = 0;
  for (size_t i = begin; i < end; ++i) params += static_cast<uint64_t>(shapes.layers[i].params);
  return 4 * params * static_cast<uint64_t>(2 + states);  // value, gradient, state
}

uint64_t measured_bytes_per_sample(const model::ModelSpec& spec, uint64_t seed) {
  constexpr int64_t kFew = 8, kMore = 64;  // rows of the two probes
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const size_t n = spec.layers.size();
  const uint64_t budget = machine_memory_bytes() / 8;  // a probe must stay small beside the run
  if (activation_bytes_per_sample(shapes, 0, n) * kMore > budget ||
      parameter_bytes(shapes, 0, n, 0) > budget)
    return 0;
  // A CPU device no run uses, with the whole model on it; its memory is given back after.
  constexpr int kScratch = 1 << 20;
  const Device scratch = Device::cpu(kScratch);
  configure_cpu_device(kScratch, {.threads = static_cast<int>(std::max(
                                      1u, std::thread::hardware_concurrency()))});
  auto model = layers::Sequential::placed(spec, std::vector<Device>(n, scratch), seed);
  const Stream stream = Stream::default_for(scratch);
  const auto peak = [&](int64_t rows) {
    std::vector<int64_t> dims = spec.input;
    dims[0] = rows;  // (rows, C, H, W) or (rows, F)
    Allocator::of(scratch).reset_peak();
    layers::Tape tape;
    layers::ForwardContext ctx;
    ctx.tape = &tape;
    const Tensor logits = model->forward(Tensor::zeros(Shape(dims), scratch), ctx);
    const Tensor labels =
        ops::labels_tensor(std::vector<int32_t>(static_cast<size_t>(rows), 0), stream);
    const ops::LossResult loss =
        ops::softmax_cross_entropy(logits, labels, static_cast<float>(rows), stream);
    tape.backward(loss.dlogits, /*need_input_grad=*/false);
    stream.synchronize();
    return Allocator::of(scratch).stats().peak_in_use;
  };
  const uint64_t few = peak(kFew), more = peak(kMore);
  model.reset();
  Allocator::of(scratch).empty_cache();
  return more > few ? (more - few) / (kMore - kFew) : 0;
}

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : UINT64_MAX;
}

std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states, uint64_t seed) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const size_t n = spec.layers.size();
  const bool any_cpu = std::any_of(plan.devices.begin(), plan.devices.end(),
                                   [](const Device& d) { return d.is_cpu(); });
  // The probe runs on a CPU device, so on GPUs alone it says nothing about them.
  const double scale =
      !any_cpu ? 1.0
               : std::max(1.0, static_cast<double>(measured_bytes_per_sample(spec, seed)) /
                                   static_cast<double>(std::max<uint64_t>(
                                       1, activation_bytes_per_sample(shapes, 0, n))));
  const int m = plan.schedule.microbatches;
  const auto rows = static_cast<uint64_t>((step_rows + m - 1) / m);  // the largest micro-batch
  std::vector<DeviceLoad> loads;
  for (const Device& d : plan.devices) loads.push_back({.device = d});
  uint64_t image = 1;  // floats per sample
  for (size_t i = 1; i < spec.input.size(); ++i) image *= static_cast<uint64_t>(spec.input[i]);
  const auto step = static_cast<uint64_t>(step_rows);
  const auto device_of = [&](int stage) { return static_cast<size_t>(plan.device_of(stage)); };
  loads[device_of(0)].staged_bytes += 2 * 4 * step * image;              // float32 images
  loads[device_of(plan.stages() - 1)].staged_bytes += 2 * 4 * step;      // int32 labels
  std::vector<double> stage_activations;  // [stage]: one micro-batch
  for (int s = 0; s < plan.stages(); ++s) {
    const StageRange& r = plan.cut.stages[static_cast<size_t>(s)];
    const auto per_sample = static_cast<uint64_t>(
        scale * static_cast<double>(activation_bytes_per_sample(shapes, r.begin, r.end)));
    stage_activations.push_back(static_cast<double>(per_sample * rows));
    loads[device_of(s)].parameter_bytes += parameter_bytes(shapes, r.begin, r.end,
                                                           optimizer_states);
  }
  const TimelineStats stats =
      measure(simulate(plan.schedule, {}).timeline, stage_activations);
  for (size_t d = 0; d < stats.devices.size() && d < loads.size(); ++d)
    loads[d].activation_bytes = static_cast<uint64_t>(stats.devices[d].peak_activation_bytes);
  return loads;
}

}  // namespace brigade::pipeline

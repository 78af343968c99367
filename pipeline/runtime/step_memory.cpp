#include "pipeline/runtime/step_memory.h"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <thread>

#include "engine/allocator.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/stream_workspace.h"
#include "kernels/ops.h"
#include "layers/sequential.h"
#include "pipeline/runtime/runtime.h"
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

std::vector<uint64_t> measured_stage_bytes(const model::ModelSpec& spec, const Partition& cut,
                                           int64_t rows, uint64_t seed) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const size_t n = spec.layers.size();
  const uint64_t budget = machine_memory_bytes() / 8;  // a probe must stay small beside the run
  if (activation_bytes_per_sample(shapes, 0, n) * static_cast<uint64_t>(rows) > budget ||
      parameter_bytes(shapes, 0, n, 0) > budget)
    return {};
  // A CPU device no run uses, with the whole model on it; its memory is given back after.
  constexpr int kScratch = kFirstInternalCpuDevice;
  const Device scratch = Device::cpu(kScratch);
  configure_cpu_device(kScratch, {.threads = static_cast<int>(std::max(
                                      1u, std::thread::hardware_concurrency()))});
  auto model = layers::Sequential::placed(spec, std::vector<Device>(n, scratch), seed);
  const Stream stream = Stream::default_for(scratch);
  // The peak of stage [begin, end)'s step on the rows: its forward with a tape, then its
  // backward from a gradient of its output (the loss's, for the last stage), with the input
  // gradient every stage but the first sends back.
  const auto peak = [&](const StageRange& stage) {
    const bool last = stage.end == n;
    std::vector<int64_t> dims = shapes.layers[stage.begin].input;  // (rows, C, H, W) or (rows, F)
    dims[0] = rows;
    std::vector<int64_t> out = shapes.layers[stage.end - 1].output;
    out[0] = rows;
    const Tensor labels =  // a blocking copy, made before the gate below; staged, not counted
        ops::labels_tensor(std::vector<int32_t>(static_cast<size_t>(rows), 0), stream);
    stream.synchronize();
    Allocator::of(scratch).reset_peak();
    const uint64_t before = Allocator::of(scratch).stats().in_use;
    // What the stage receives (or, the first, what the staging area hands it) counts: it is
    // held from the forward to the backward.
    const Tensor input = Tensor::zeros(Shape(dims), scratch);
    const Tensor dy = last ? Tensor() : Tensor::zeros(Shape(out), scratch);  // from the next stage
    // The stream waits at a gate until the whole step is described: every tensor of it, the
    // backward's gradients and the kernels' workspace (im2col, GEMM packing) included, is then
    // held at once (a CPU task holds its tensors until it runs), so the peak is the most one
    // micro-batch's step can hold, whatever the timing, and the same in every run. (Nothing
    // below waits for the stream: the layers' forward and backward and the loss only enqueue.)
    std::promise<void> described;
    stream.enqueue([gate = described.get_future().share()] { gate.wait(); });
    struct Open {
      std::promise<void>& gate;
      ~Open() { gate.set_value(); }
    } open{described};
    layers::Tape tape;
    layers::ForwardContext ctx;
    ctx.tape = &tape;
    const Tensor y = model->forward(input, ctx, stage.begin, stage.end);
    if (last) {
      const ops::LossResult loss =
          ops::softmax_cross_entropy(y, labels, static_cast<float>(rows), stream);
      tape.backward(loss.dlogits, /*need_input_grad=*/false);
    } else {
      tape.backward(dy, /*need_input_grad=*/stage.begin != 0);
    }
    return Allocator::of(scratch).stats().peak_in_use - before;
  };
  // Probed at the micro-batch's own rows: a kernel's workspace need not grow in step with them
  // (a lowering cut into chunks), so no line through other sizes is trusted.
  std::vector<uint64_t> bytes;
  for (const StageRange& stage : cut.stages) bytes.push_back(peak(stage));
  stream.synchronize();
  model.reset();
  Allocator::of(scratch).empty_cache();
  return bytes;
}

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : UINT64_MAX;
}

std::vector<uint64_t> stage_bytes(const model::ModelSpec& spec, const Plan& plan, int64_t rows,
                                  uint64_t seed) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  // The probe runs on a CPU device, so on GPUs alone it says nothing about them.
  const bool any_cpu = std::any_of(plan.devices.begin(), plan.devices.end(),
                                   [](const Device& d) { return d.is_cpu(); });
  const std::vector<uint64_t> measured =
      any_cpu ? measured_stage_bytes(spec, plan.cut, rows, seed) : std::vector<uint64_t>{};
  std::vector<uint64_t> out;
  for (size_t s = 0; s < plan.cut.stages.size(); ++s) {
    const StageRange& r = plan.cut.stages[s];
    const uint64_t analytic =
        activation_bytes_per_sample(shapes, r.begin, r.end) * static_cast<uint64_t>(rows);
    out.push_back(std::max(analytic, s < measured.size() ? measured[s] : 0));
  }
  return out;
}

namespace {
// Bytes of the largest im2col columns a hand-written convolution of stage `r` lowers for a
// micro-batch of `rows` (stream_workspace.h): a sample's columns are (C·R·S, P·Q).
uint64_t lowering_bytes(const model::ModelSpec& spec, const model::ModelShapes& shapes,
                        const StageRange& r, int64_t rows) {
  uint64_t largest = 0;
  for (size_t i = r.begin; i < r.end; ++i) {
    if (spec.layers[i].kind != model::LayerKind::conv2d) continue;
    const model::LayerShape& l = shapes.layers[i];  // input (1, C, H, W), output (1, K, P, Q)
    const int64_t sample_columns =
        l.input[1] * spec.layers[i].kernel_h * spec.layers[i].kernel_w * l.output[2] * l.output[3];
    largest = std::max(largest, sizeof(float) * static_cast<uint64_t>(cuda::conv_lowering_floats(
                                                    sample_columns, rows)));
  }
  return largest;
}
}  // namespace

std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states, uint64_t seed) {
  return step_loads(spec, plan, step_rows, optimizer_states,
                    stage_bytes(spec, plan,
                                largest_microbatch_rows(step_rows, plan.schedule.microbatches),
                                seed));
}

std::vector<DeviceLoad> step_loads(const model::ModelSpec& spec, const Plan& plan,
                                   int64_t step_rows, int optimizer_states,
                                   const std::vector<uint64_t>& bytes) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const int64_t rows = largest_microbatch_rows(step_rows, plan.schedule.microbatches);
  std::vector<DeviceLoad> loads;
  for (const Device& d : plan.devices) loads.push_back({.device = d});
  uint64_t image = 1;  // floats per sample
  for (size_t i = 1; i < spec.input.size(); ++i) image *= static_cast<uint64_t>(spec.input[i]);
  const auto step = static_cast<uint64_t>(step_rows);
  const auto device_of = [&](int stage) { return static_cast<size_t>(plan.device_of(stage)); };
  loads[device_of(0)].staged_bytes += 2 * 4 * step * image;              // float32 images
  // A GPU is sent the images as their bytes and decodes them there (tools/train/staging.h):
  // it holds those bytes too.
  if (plan.devices[device_of(0)].is_cuda()) loads[device_of(0)].staged_bytes += 2 * step * image;
  loads[device_of(plan.stages() - 1)].staged_bytes += 2 * 4 * step;      // int32 labels
  std::vector<double> stage_activations;  // [stage]: one micro-batch
  std::vector<Device> evaluating;  // the GPUs whose default stream's workspace is counted
  for (int s = 0; s < plan.stages(); ++s) {
    const StageRange& r = plan.cut.stages[static_cast<size_t>(s)];
    stage_activations.push_back(static_cast<double>(bytes.at(static_cast<size_t>(s))));
    DeviceLoad& load = loads[device_of(s)];
    load.parameter_bytes += parameter_bytes(shapes, r.begin, r.end, optimizer_states);
    // A stream that runs GEMMs keeps a workspace for them from the first on: on the vendor
    // path cuBLAS's, for a Dense layer's (a convolution's are cuDNN's); on the hand-written
    // path the split-K scratch, for a Dense or Conv2D layer's (made at the first launch that
    // splits, which the shapes decide; a conv's filter gradient, summed over the batch, and a
    // narrow Dense do). Kept by the pipeline device's stream, and by the GPU's default stream,
    // where an evaluation runs the model (tools/train/evaluate.cpp): once per pipeline
    // device, and once more per GPU (on the first of its pipeline devices).
    const bool vendor = cuda_path() == CudaPath::vendor;
    const bool runs_gemms =
        std::any_of(spec.layers.begin() + static_cast<std::ptrdiff_t>(r.begin),
                    spec.layers.begin() + static_cast<std::ptrdiff_t>(r.end),
                    [&](const model::LayerSpec& l) {
                      return l.kind == model::LayerKind::dense ||
                             (!vendor && l.kind == model::LayerKind::conv2d);
                    });
    const uint64_t kept = vendor ? cuda::kCublasWorkspaceBytes : cuda::kSplitKScratchBytes;
    if (load.device.is_cuda() && runs_gemms && load.workspace_bytes == 0) {
      load.workspace_bytes = kept;
      if (std::find(evaluating.begin(), evaluating.end(), load.device) == evaluating.end()) {
        load.workspace_bytes += kept;
        evaluating.push_back(load.device);
      }
    }
    // A hand-written convolution takes its lowered input (im2col's columns) from the stream
    // and gives it back after: the stream's largest, beside the activations it holds. (An
    // evaluation lowers a micro-batch's rows too, after the step has given its tensors back.)
    if (load.device.is_cuda() && !vendor)
      load.lowering_bytes = std::max(load.lowering_bytes, lowering_bytes(spec, shapes, r, rows));
  }
  // At the schedule's worst instant each device holds its micro-batches in flight; and on a
  // CPU device one more: the host thread issues the next action while the stream runs this
  // one (executor.cpp, ComputeLead), and that action's tensors are allocated when it is issued.
  const TimelineStats stats =
      measure(simulate(plan.schedule, {}).timeline, stage_activations);
  for (size_t d = 0; d < stats.devices.size() && d < loads.size(); ++d) {
    double ahead = 0;
    if (loads[d].device.is_cpu())
      for (int s : plan.schedule.stages_on(static_cast<int>(d)))
        ahead = std::max(ahead, stage_activations[static_cast<size_t>(s)]);
    loads[d].activation_bytes =
        static_cast<uint64_t>(stats.devices[d].peak_activation_bytes + ahead);
  }
  return loads;
}

}  // namespace brigade::pipeline

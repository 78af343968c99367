#include "tools/bench/cuda_impl.h"
#include "tools/bench/model_bench.h"

#include <cstdio>

#include "engine/device.h"
#include "engine/stream.h"
#include "kernels/cuda/path.h"
#include "kernels/ops.h"
#include "layers/optimizers.h"
#include "layers/sequential.h"
#include "tools/bench/timing.h"
#include "tools/data/dataset.h"

namespace brigade::bench {
namespace {

// The model file's network with every layer on `device`.
std::unique_ptr<layers::Sequential> on_one_device(const model::ModelSpec& spec,
                                                  const Device& device, uint64_t seed) {
  int blocks = 1;
  for (const model::LayerSpec& l : spec.layers) blocks = std::max(blocks, l.device + 1);
  return layers::Sequential::from_spec(spec, std::vector<Device>(static_cast<size_t>(blocks), device),
                                       seed);
}

struct Batch {
  Tensor images;  // (B, C, H, W)
  Tensor labels;  // (B) int32
};

// Two different batches, so that consecutive steps do not see the same data.
std::vector<Batch> make_batches(const model::ModelSpec& spec, int64_t B, const Stream& st) {
  std::vector<int64_t> shape = spec.input;  // (1, C, H, W) or (1, F)
  const data::Dataset ds = data::make_synthetic(data::Split::train, 3, 2 * B);
  std::vector<Batch> batches;
  for (int k = 0; k < 2; ++k) {
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int64_t i = k * B; i < (k + 1) * B; ++i) {
      for (int64_t j = 0; j < ds.sample_size(); ++j)
        x.push_back(ds.pixels[static_cast<size_t>(i * ds.sample_size() + j)] / 255.0f);
      y.push_back(ds.labels[static_cast<size_t>(i)]);
    }
    shape[0] = B;
    batches.push_back({Tensor::from_vector(x, Shape(shape), st), ops::labels_tensor(y, st)});
  }
  return batches;
}

ModelRow run(const model::ModelSpec& spec, const Device& device, const std::string& impl,
             int threads, int64_t B, const ModelBenchOptions& o) {
  const Stream st = Stream::default_for(device);
  auto model = on_one_device(spec, device, o.seed);
  layers::SGD opt(model->parameters(), SgdParams{.lr = 0.01, .momentum = 0.9});
  const std::vector<Batch> batches = make_batches(spec, B, st);
  uint32_t step = 0;
  auto train_step = [&] {
    const Batch& b = batches[step % batches.size()];
    opt.zero_grad();
    layers::Tape tape;
    layers::ForwardContext ctx;
    ctx.seed = o.seed;
    ctx.step = step++;
    ctx.tape = &tape;
    const Tensor logits = model->forward(b.images, ctx);
    const ops::LossResult loss = ops::softmax_cross_entropy(logits, b.labels, static_cast<float>(B), st);
    tape.backward(loss.dlogits, /*need_input_grad=*/false);
    opt.step();
  };
  for (int i = 0; i < o.warmup; ++i) train_step();
  st.synchronize();
  std::vector<double> per_step, cpu_per_step;
  for (int r = 0; r < o.repetitions; ++r) {
    const double t0 = now_s(), c0 = process_cpu_s();
    for (int i = 0; i < o.steps; ++i) train_step();
    st.synchronize();
    per_step.push_back((now_s() - t0) / o.steps);
    cpu_per_step.push_back((process_cpu_s() - c0) / o.steps);
  }
  const double s = summarize(per_step).median_s;
  ModelRow row{device.str(), impl, threads, B, s * 1e3, 0, static_cast<double>(B) / s, 0};
  row.cpu_step_ms = summarize(cpu_per_step).median_s * 1e3;
  row.gflops = training_flops_per_sample(spec) * static_cast<double>(B) / s * 1e-9;
  std::fprintf(stderr, "  model %-7s %-12s %2d thr  batch %4lld  %9.1f samples/s\n",
               row.device.c_str(), impl.c_str(), threads, static_cast<long long>(B),
               row.samples_per_s);
  return row;
}

}  // namespace

double training_flops_per_sample(const model::ModelSpec& spec) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  double flops = 3.0 * static_cast<double>(shapes.total_flops);
  for (const model::LayerShape& l : shapes.layers)
    if (l.flops > 0) {  // the first layer with arithmetic gets no input gradient
      flops -= static_cast<double>(l.flops);
      break;
    }
  return flops;
}

std::vector<ModelRow> bench_model(const model::ModelSpec& spec, const ModelBenchOptions& o) {
  std::vector<ModelRow> rows;
  if (o.cpu)
    for (int threads : o.threads) {
      configure_cpu_device(o.cpu_device, {.threads = threads});
      for (int64_t B : o.batches)
        rows.push_back(run(spec, Device::cpu(o.cpu_device), "cpu", threads, B, o));
    }
  if (cuda_device_count() > 0)
    for (const std::string& impl : o.cuda_impls) {
      const CudaImpl measured(impl, o.math);
      for (int64_t B : o.batches) rows.push_back(run(spec, Device::cuda(0), impl, 0, B, o));
    }
  return rows;
}

}  // namespace brigade::bench

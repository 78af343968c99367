#include "tools/bench/one_stage_run.h"

#include <utility>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "layers/optimizers.h"
#include "tools/data/dataset.h"

namespace brigade::bench {
namespace {

// Samples [0, n) of a synthetic data set (Fashion-MNIST's shapes) as one micro-batch on
// `device`, written before this returns (its events are never recorded: "written already").
pipeline::StagedBatch staged_synthetic_batch(const Device& device, int64_t n) {
  const data::Dataset ds = data::make_synthetic(data::Split::train, 3, n);
  std::vector<float> x;  // (n, C, H, W)
  x.reserve(ds.pixels.size());
  for (const uint8_t pixel : ds.pixels) x.push_back(static_cast<float>(pixel) / 255.0f);
  pipeline::StagedBatch staged;
  staged.inputs.push_back(
      Tensor::from_vector(x, Shape({n, ds.channels, ds.height, ds.width}), device));
  staged.labels.push_back(ops::labels_tensor(ds.labels, Stream::default_for(device)));
  return staged;
}

}  // namespace

OneStageRun::OneStageRun(const model::ModelSpec& spec, const Device& device, int64_t batch,
                         uint64_t seed, bool cuda_graphs)
    : plan_(pipeline::make_plan(spec, {.devices = {device}, .schedule = "naive"})),
      model_(pipeline::build_model(spec, plan_, seed)),
      runtime_(std::make_unique<pipeline::Runtime>(
          *model_, plan_.devices, plan_.cut, plan_.lowered,
          [](std::vector<layers::Parameter*> params) {
            return std::make_unique<layers::SGD>(std::move(params),
                                                 SgdParams{.lr = 0.01, .momentum = 0.9});
          },
          pipeline::RuntimeOptions{.seed = seed, .cuda_graphs = cuda_graphs})),
      data_(staged_synthetic_batch(device, batch)) {}

// The runtime goes before the model it runs and the batch it may still read.
OneStageRun::~OneStageRun() { runtime_.reset(); }

void OneStageRun::submit() { runtime_->submit(data_, next_step_++); }
void OneStageRun::step() { runtime_->step(data_, next_step_++); }
void OneStageRun::flush() { runtime_->flush(); }

}  // namespace brigade::bench

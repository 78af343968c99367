// The hand-written CUDA path's launches per training step do not grow with the batch, on
// emulated GPUs (an -Dcuda=emulated build; the test is empty elsewhere): every kernel works on
// a whole micro-batch (a conv's im2col, GEMM and col2im included), none runs once per sample.
// The emulated runtime counts the grids it launches (cuda_emulation.h's call_counts).
#include <doctest/doctest.h>

#if defined(BRIGADE_CUDA_EMULATED)
#include <cuda_emulation.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "kernels/cuda/path.h"
#include "layers/model/model_file.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

// Sets the process's CUDA path for one scope, and puts the previous one back.
class CudaPathFor {
 public:
  explicit CudaPathFor(CudaPath path) : before_(cuda_path()) { set_cuda_path(path); }
  ~CudaPathFor() { set_cuda_path(before_); }
  CudaPathFor(const CudaPathFor&) = delete;
  CudaPathFor& operator=(const CudaPathFor&) = delete;

 private:
  CudaPath before_;
};

// n random samples of the model's input (1, C, H, W), labels in [0, 10).
HostBatch random_images(const model::ModelSpec& spec, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  HostBatch b;
  b.shape = Shape({n, spec.input[1], spec.input[2], spec.input[3]});
  for (int64_t i = 0; i < b.shape.numel(); ++i) b.x.push_back(u(gen));
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(gen() % 10));
  return b;
}

// Kernels one training step of `spec` at batch n launches, the whole model one stage on
// cuda:0, two micro-batches; counted on the second step (the first warms up).
uint64_t launches_per_step(const model::ModelSpec& spec, int64_t n) {
  const Partition partition = at_cuts(spec.layers.size(), {});
  auto model = layers::Sequential::placed(
      spec, layer_devices(partition, {Device::cuda(0)}, Placement::looped), test::kModelSeed);
  Runtime runtime(*model, {Device::cuda(0)}, partition, make_schedule("1f1b", 1, 2), test::sgd,
                  {.seed = test::kDropoutSeed});
  runtime.step(random_images(spec, n, 1), 0);
  const HostBatch second = random_images(spec, n, 2);
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
  runtime.step(second, 1);
  return emu::gpu::call_counts().since(before).kernel_launches;
}

TEST_CASE("hand-written path: a training step launches as many kernels at batch 32 as at 128") {
  if (!test::on_cuda()) {
    MESSAGE("BRIGADE_TEST_DEVICES is not cuda or cuda:all: no GPU to count launches on");
    return;
  }
  testing::Deadline deadline("launches per step on the hand-written path");
  const CudaPathFor handwritten(CudaPath::handwritten);
  // The question's network (every layer kind, four convolutions) at its own 28x28 input.
  const model::ModelSpec spec =
      model::load_model_file(std::string(BRIGADE_SOURCE_ROOT) + "/tools/models/seed_cnn.model");
  std::map<int64_t, uint64_t> launches;
  for (int64_t n : {32, 128}) launches[n] = launches_per_step(spec, n);
  INFO("launches per step: " << launches[32] << " at batch 32, " << launches[128] << " at 128");
  CHECK(launches[32] > 0);
  CHECK(launches[32] == launches[128]);
}

}  // namespace
}  // namespace brigade::pipeline

#endif  // BRIGADE_CUDA_EMULATED

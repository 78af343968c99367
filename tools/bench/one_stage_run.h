// The model as brigade-train runs it on one device: one stage, one micro-batch, stepped by the
// pipeline runtime (pipeline::Runtime) with SGD with momentum, on a batch of synthetic data
// staged on the device once. What the runtime level times (runtime_bench.h) and --count-calls
// counts (call_count_bench.h): the same steps, so the two figures describe one thing.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/device.h"
#include "layers/model/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/runtime.h"

namespace brigade::bench {

class OneStageRun {
 public:
  // `spec` on `device` (the naive schedule's plan of one device: one stage, one micro-batch),
  // parameters from `seed`; a batch of `batch` synthetic samples (Fashion-MNIST's shapes, the
  // data set's bytes / 255 as brigade-train stages them) put on the device before this
  // returns. Staged once: brigade-train's staging area fills the next batch while a step runs
  // (tools/train/staging.h), so its copies are no part of a step. `cuda_graphs`:
  // pipeline::RuntimeOptions::cuda_graphs (no effect on a CPU device).
  OneStageRun(const model::ModelSpec& spec, const Device& device, int64_t batch, uint64_t seed,
              bool cuda_graphs);
  ~OneStageRun();
  OneStageRun(const OneStageRun&) = delete;
  OneStageRun& operator=(const OneStageRun&) = delete;

  // The next step, submitted as brigade-train submits it (pipeline::Runtime::submit): on the
  // GPUs' verdict it returns without waiting for itself, after waiting once for the step
  // before it.
  void submit();
  // The next step, and the host's wait for it: nothing pending after.
  void step();
  // Waits for the pending step, if any.
  void flush();

 private:
  pipeline::Plan plan_;
  std::unique_ptr<layers::Sequential> model_;
  std::unique_ptr<pipeline::Runtime> runtime_;
  pipeline::StagedBatch data_;
  uint32_t next_step_ = 0;
};

}  // namespace brigade::bench

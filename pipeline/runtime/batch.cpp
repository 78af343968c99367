// The batch a step takes (runtime.h): a host batch cut into micro-batches and copied onto the
// first and last stages' devices (this process's replica's rows of it), or a batch the caller
// already staged there, checked against the schedule and the devices. Both end in run_step()
// (executor.cpp), which runs the step itself: submit(). step() is submit() then flush().
#include <sstream>
#include <utility>

#include "kernels/ops.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step.h"

namespace brigade::pipeline {
namespace {
// Runtime::step: submit(), then flush() where the step stayed pending.
template <typename Batch>
StepResult submitted_and_flushed(Runtime& runtime, const Batch& batch, uint32_t step) {
  BRIGADE_CHECK(!runtime.pending_step(),
                "runtime: step(" << step << ") while step " << *runtime.pending_step()
                                 << " is pending from submit(): flush() it first");
  std::optional<StepResult> r = runtime.submit(batch, step);
  return r ? *r : *runtime.flush();
}

}  // namespace

std::vector<int64_t> microbatch_rows(int64_t n, int m) {
  BRIGADE_CHECK(m >= 1, "runtime: " << m << " micro-batches; there must be at least one");
  BRIGADE_CHECK(n >= m, "runtime: a mini-batch of " << n << " samples cannot be cut into " << m
                                                    << " micro-batches");
  std::vector<int64_t> rows;
  for (int i = 0; i < m; ++i) rows.push_back(n / m + (i < n % m ? 1 : 0));
  return rows;
}

int64_t largest_microbatch_rows(int64_t n, int m) {
  BRIGADE_CHECK(m >= 1, "runtime: " << m << " micro-batches; there must be at least one");
  return (n + m - 1) / m;
}

std::optional<StepResult> Runtime::submit(const HostBatch& batch, uint32_t step) {
  const int m = schedule_.microbatches;
  const int64_t global_n = batch.shape.rank() > 0 ? batch.shape[0] : 0;
  BRIGADE_CHECK(static_cast<int64_t>(batch.labels.size()) == global_n &&
                    static_cast<int64_t>(batch.x.size()) == batch.shape.numel(),
                "runtime: the batch has shape " << batch.shape << ", " << batch.x.size()
                                                << " values and " << batch.labels.size()
                                                << " labels");
  // This replica's rows [first_sample, first_sample + n) of the mini-batch (all of it alone).
  BRIGADE_CHECK(global_n >= role_.replicas,
                "runtime: a mini-batch of " << global_n << " samples cannot be shared by "
                                            << role_.replicas << " replicas");
  const std::vector<int64_t> shares = microbatch_rows(global_n, role_.replicas);
  int64_t first_sample = 0;
  for (int r = 0; r < role_.replica; ++r) first_sample += shares[static_cast<size_t>(r)];
  const int64_t n = shares[static_cast<size_t>(role_.replica)];
  const std::vector<int64_t> rows = microbatch_rows(n, m);
  // Stage the micro-batches on the first and last stages' devices, where they are run here:
  // blocking host copies, so the staged batch needs no events.
  const int64_t per_sample = batch.shape.numel() / global_n;
  const int first_device = schedule_.device_of(0);
  const int last_device = schedule_.device_of(schedule_.stages() - 1);
  StagedBatch staged;
  int64_t offset = first_sample;
  bool labels_next = false;  // which of the two copies of micro-batch `staged` is being made
  try {
    for (int i = 0; i < m; ++i) {
      const int64_t size = rows[static_cast<size_t>(i)];
      std::vector<int64_t> dims = batch.shape.dims();
      dims[0] = size;
      staged.inputs.push_back(
          runs(first_device)
              ? Tensor::from_vector(
                    std::vector<float>(batch.x.begin() + offset * per_sample,
                                       batch.x.begin() + (offset + size) * per_sample),
                    Shape(dims), streams_[static_cast<size_t>(first_device)]->compute)
              : Tensor());
      labels_next = true;
      staged.labels.push_back(
          runs(last_device)
              ? ops::labels_tensor(std::vector<int32_t>(batch.labels.begin() + offset,
                                                        batch.labels.begin() + offset + size),
                                   streams_[static_cast<size_t>(last_device)]->compute)
              : Tensor());
      labels_next = false;
      offset += size;
    }
  } catch (const std::exception& e) {
    // Before any action: say which micro-batch could not be put on which device.
    const int stage = labels_next ? schedule_.stages() - 1 : 0;
    const int d = schedule_.device_of(stage);
    std::ostringstream os;
    os << "pipeline step " << step << ": staging micro-batch " << staged.labels.size()
       << (labels_next ? "'s labels" : "") << " on " << devices_[static_cast<size_t>(d)]
       << " (stage " << stage << ") failed: " << e.what();
    abandon_reductions(os.str());  // this step will never reach its update
    // A pending step first: its failure, if any, came first and is the one thrown; else its
    // result goes with this failure (PipelineError::completed). The streams are not replaced
    // under it.
    std::optional<StepResult> completed = flush();
    os << recover_after_failure();
    throw PipelineError(os.str(), step, d, stage, std::nullopt, std::move(completed));
  }
  return run_step(staged, rows, first_sample, global_n, step);
}

std::optional<StepResult> Runtime::submit(const StagedBatch& batch, uint32_t step) {
  const int m = schedule_.microbatches;
  const int first_device = schedule_.device_of(0);
  const int last_device = schedule_.device_of(schedule_.stages() - 1);
  BRIGADE_CHECK(role_.replicas == 1 && (runs(first_device) || runs(last_device)),
                "runtime: a staged batch is the whole mini-batch of a process that runs the "
                "first or the last stage; replica "
                    << role_.replica << " of " << role_.replicas
                    << " takes its rows from step(HostBatch)");
  BRIGADE_CHECK(static_cast<int>(batch.inputs.size()) == m &&
                    static_cast<int>(batch.labels.size()) == m,
                "runtime: a staged batch of " << batch.inputs.size() << " inputs and "
                                              << batch.labels.size() << " labels for a schedule of "
                                              << m << " micro-batches");
  // Each staged tensor is checked where it is read: inputs on the first stage's device,
  // labels on the last's, when this process runs them.
  const bool in = runs(first_device), out = runs(last_device);
  std::vector<int64_t> rows;
  int64_t n = 0;
  for (int i = 0; i < m; ++i) {
    const Tensor& x = batch.inputs[static_cast<size_t>(i)];
    const Tensor& y = batch.labels[static_cast<size_t>(i)];
    const int64_t size = in ? (x.defined() && x.shape().rank() > 0 ? x.shape()[0] : 0)
                            : (y.defined() && y.shape().rank() > 0 ? y.shape()[0] : 0);
    BRIGADE_CHECK(size > 0 && (!in || x.defined()) && (!out || (y.defined() && y.shape() == Shape({size}))),
                  "runtime: staged micro-batch " << i << " has inputs "
                                                 << (x.defined() ? x.str() : "(none)")
                                                 << " and labels "
                                                 << (y.defined() ? y.str() : "(none)"));
    BRIGADE_CHECK((!in || x.device() == devices_[static_cast<size_t>(first_device)]) &&
                      (!out || y.device() == devices_[static_cast<size_t>(last_device)]),
                  "runtime: staged micro-batch " << i << " has its inputs on "
                                                 << (in ? x.device().str() : "-")
                                                 << " and labels on "
                                                 << (out ? y.device().str() : "-")
                                                 << "; the first stage runs on "
                                                 << devices_[static_cast<size_t>(first_device)]
                                                 << " and the last on "
                                                 << devices_[static_cast<size_t>(last_device)]);
    rows.push_back(size);
    n += size;
  }
  return run_step(batch, rows, 0, n, step);
}

std::optional<StepResult> Runtime::flush() {
  if (!pending_) return std::nullopt;
  std::unique_ptr<Step> none;
  return finish(std::exchange(pending_, nullptr), none);
}

std::optional<uint32_t> Runtime::pending_step() const {
  return pending_ ? std::optional<uint32_t>(pending_->inputs.step) : std::nullopt;
}

StepResult Runtime::step(const HostBatch& batch, uint32_t step) {
  return submitted_and_flushed(*this, batch, step);
}

StepResult Runtime::step(const StagedBatch& batch, uint32_t step) {
  return submitted_and_flushed(*this, batch, step);
}

}  // namespace brigade::pipeline

// The step's update, once every device has enqueued its list: the sums across replicas, the
// clipping by the global norm, and the optimizers — on GPUs obeying the checks' verdict kept
// on the devices (step_verdict.h). A step that failed before its update abandons its
// reductions instead. Part of the Runtime (runtime.h); run_step (executor.cpp) calls these.
#include <algorithm>
#include <utility>

#include "layers/grad_clip.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/runtime/step.h"

namespace brigade::pipeline {

// Every W of the stages was enqueued on their compute streams before: the sums across
// replicas, the clipping and the optimizers see them all. Devices in order, each device's
// stages in order: replicas' reducers meet in the same order.
//
// On the GPUs' verdict (step_verdict.h), each stage's optimizer obeys its device's table, and
// the last stage's device's table is copied to the host behind its update, for the step's end
// to read.
bool Runtime::verdict_on_devices() const {
  for (size_t d = 0; d < devices_.size(); ++d)
    if (!local_[d] || !devices_[d].is_cuda()) return false;
  const bool reduced = std::any_of(role_.reducers.begin(), role_.reducers.end(),
                                   [](const GradientReducer* r) { return r != nullptr; });
  return role_.replicas == 1 && !reduced && options_.max_grad_norm <= 0;
}

bool Runtime::update_parameters(Step& step) {
  bool stepped = false;
  int device = 0;  // the device being updated, named if it fails (clipping: device 0)
  const auto on_every_stage = [&](const auto& part) {
    for (device = 0; device < schedule_.devices; ++device)
      if (runs(device))
        for (int s : schedule_.stages_on(device))
          part(*stages_[static_cast<size_t>(s)], streams_[static_cast<size_t>(device)]->compute);
    device = 0;
  };
  try {
    if (step.verdict.defined()) {  // every device's word to every device, before any update
      std::vector<const DeviceStreams*> mine;
      for (const std::optional<DeviceStreams>& s : streams_) mine.push_back(&*s);
      step.verdict.exchange(mine);
    }
    on_every_stage([](Stage& stage, const Stream& compute) { stage.reduce(compute); });
    if (options_.max_grad_norm > 0 && !clip_gradients()) return false;
    on_every_stage([&](Stage& stage, const Stream& compute) {
      stage.step(compute, step.verdict.defined() ? step.verdict.table(device) : Tensor(),
                 options_.cuda_graphs);
    });
    stepped = true;
    if (step.verdict.defined())  // read where the tally is
      step.verdict.copy_to_host(
          streams_[static_cast<size_t>(schedule_.device_of(schedule_.stages() - 1))]->compute);
  } catch (...) {
    fail(step, device, std::nullopt, std::current_exception());
  }
  return stepped;
}

// A step that failed before its update: the replicas of its stages must not wait for sums
// this one will never give (gradient_reducer.h).
void Runtime::abandon_reductions(const std::string& why) {
  for (int device = 0; device < schedule_.devices; ++device)
    if (runs(device))
      for (int s : schedule_.stages_on(device)) stages_[static_cast<size_t>(s)]->abandon_reduction(why);
}

// RuntimeOptions::max_grad_norm: each stage's gradients once written, their squares summed
// per parameter in the model's order (stage 0's first), one coefficient for all of them.
// False, and nothing scaled, when a compute stream failed (a NaN check, a bad label on a CPU
// device): the step's final synchronisation reports that failure, from where it began.
//
// Stages run by other processes (ProcessRole::sum_over_pipeline): this process puts 0 for
// their parameters and one more entry, 1 if its own streams failed; the pipeline's sum then
// holds every parameter's part and the count of failed processes. Every process takes part in
// that sum even after a failure of its own, so none waits for it forever; a process whose
// streams are healthy but whose pipeline failed elsewhere fails its step too, changing nothing.
bool Runtime::clip_gradients() {
  bool failed_here = false;
  for (const std::optional<DeviceStreams>& s : streams_) {
    if (!s) continue;
    try {
      s->compute.synchronize();
    } catch (const std::exception&) {
      failed_here = true;
    }
  }
  if (failed_here && !role_.sum_over_pipeline) return false;
  std::vector<double> squares;  // per parameter, in the model's order
  for (int s = 0; s < schedule_.stages(); ++s) {
    const std::unique_ptr<Stage>& stage = stages_[static_cast<size_t>(s)];
    if (stage && !failed_here) {
      const std::vector<double> mine = layers::squared_norms(stage->parameters());
      squares.insert(squares.end(), mine.begin(), mine.end());
    } else {  // another process's stage, or nothing to say: 0 for each of its parameters
      const StageRange& r = partition_.stages[static_cast<size_t>(s)];
      squares.resize(squares.size() + model_.parameters(r.begin, r.end).size(), 0.0);
    }
  }
  if (role_.sum_over_pipeline) {
    squares.push_back(failed_here ? 1.0 : 0.0);
    squares = role_.sum_over_pipeline(std::move(squares));
    const double failed_processes = squares.back();
    squares.pop_back();
    if (failed_here) return false;
    BRIGADE_CHECK(failed_processes == 0,
                  "clipping by the global norm: a stage run by another process failed in this "
                  "step (that process names it); no parameter changes");
  }
  const double coefficient = layers::clip_coefficient(squares, options_.max_grad_norm);
  for (int d = 0; d < schedule_.devices; ++d)
    if (runs(d))
      for (int s : schedule_.stages_on(d))
        layers::scale_gradients(stages_[static_cast<size_t>(s)]->parameters(), coefficient,
                                streams_[static_cast<size_t>(d)]->compute);
  return true;
}

}  // namespace brigade::pipeline

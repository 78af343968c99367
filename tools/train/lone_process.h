// LoneProcess: a run in this process alone (no --distributed). It runs every stage of the
// pipeline (PipelinedRunner, runners.h), reports and writes; there is no one to gather from,
// broadcast to or agree with, so those are no-ops and a stop is the signal this process
// caught (signals.h).
#pragma once

#include "tools/train/training_processes.h"

namespace brigade::train {

class LoneProcess final : public TrainingProcesses {
 public:
  bool distributed() const override { return false; }
  bool is_reporter() const override { return true; }

  Options pipeline_options(const Options& options, const model::ModelSpec&) override {
    return options;
  }
  std::unique_ptr<StepRunner> make_runner(layers::Sequential& model, const pipeline::Plan& plan,
                                          const Options& options) override;

  void gather_model(layers::Sequential&, const StepRunner&) override {}
  void broadcast_model(layers::Sequential&, const StepRunner&, ResumePoint&) override {}
  void on_reporter(const std::function<void()>& fn, const std::string&) override { fn(); }
  int64_t from_reporter(int64_t value, const std::string&) override { return value; }

  void agree_on_step(pipeline::StepResult&, bool) override {}
  void agree_on_stop() override {}
  int stop_requested() const override;

  void combine_busy_times(std::vector<double>&, double&) override {}
  std::string device_label(size_t, const Device& placed) const override { return placed.str(); }
  void gather_timeline(pipeline::Timeline&, std::chrono::steady_clock::time_point) override {}

  bool agree_on_refusal() override { return true; }
  void end_job_for_own_error(const std::string&) override {}
};

}  // namespace brigade::train

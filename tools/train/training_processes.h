// TrainingProcesses: the processes a run trains in, as this process sees them. The run
// (Training, training.h) asks it everything whose answer depends on whether this process
// trains alone or as one rank of an mpirun job, and never asks which:
//
//   LoneProcess  (lone_process.h) this process runs every stage, reports and writes; every
//                exchange is a no-op.
//   MpiRanks     (distributed.h, built only where Meson finds MPI) this process is one rank
//                of `mpirun ... brigade-train --distributed`: it plays its role in the
//                pipeline, and the ranks gather, broadcast and agree through MPI.
//
// main.cpp is the one place that chooses between them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/sequential.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/runtime.h"
#include "pipeline/schedule/schedule.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"
#include "tools/train/runners.h"

namespace brigade::train {

// An error every process of the run raises alike, at the same point (a lone process is the
// only one): the reporting process prints it, every process exits with `status` (2 for usage
// errors, 1 otherwise).
class AllRanksError : public std::runtime_error {
 public:
  AllRanksError(const std::string& what, int status)
      : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class TrainingProcesses {
 public:
  virtual ~TrainingProcesses() = default;

  // True for one rank of an mpirun job, which plays its role in the pipeline; false for a
  // process that runs all of it.
  virtual bool distributed() const = 0;
  // True for the process that prints, evaluates and writes every file: a lone process, or
  // rank 0. The others stay silent.
  virtual bool is_reporter() const = 0;

  // The options of the pipeline this process takes part in (`options` as they are for a lone
  // process; under mpirun one device per rank of a pipeline, distributed.h).
  virtual Options pipeline_options(const Options& options, const model::ModelSpec& spec) = 0;
  // The runner of this process's role in each step of `plan` (runners.h), `model` built for it.
  virtual std::unique_ptr<StepRunner> make_runner(layers::Sequential& model,
                                                  const pipeline::Plan& plan,
                                                  const Options& options) = 0;

  // Before the reporter reads the model (evaluation, checkpoint, --save): it gathers every
  // stage's parameters and optimizer state.
  virtual void gather_model(layers::Sequential& model, const StepRunner& runner) = 0;
  // After the reporter set the model (--resume, --init-from): every process takes its
  // parameters, optimizer state and `resume_point`.
  virtual void broadcast_model(layers::Sequential& model, const StepRunner& runner,
                               ResumePoint& resume_point) = 0;
  // Runs `fn` on the reporter alone; an error it throws becomes every process's (a
  // UsageError stays one: a check of the reporter's files is a refusal on every process).
  virtual void on_reporter(const std::function<void()>& fn, const std::string& what) = 0;
  // The reporter's `value`, on every process (a lone process's own): a number the reporter
  // alone read, e.g. from a file only its host may hold. `what` names it in a wait that ends.
  virtual int64_t from_reporter(int64_t value, const std::string& what) = 0;

  // After each step: the step's loss, correct count and bytes sent over every process (each
  // replica's last stage holds its share of the first two), and whether any process caught a
  // stop signal; with `peak_memory` (--metrics), its peak memory per device too, of every
  // process's devices (under mpirun each rank measures its own alone), in the same exchange.
  virtual void agree_on_step(pipeline::StepResult& result, bool peak_memory) = 0;
  // After an evaluation: whether any process caught a stop signal while it ran (the reporter
  // abandons it for its own), so that every process stops after it, or none.
  virtual void agree_on_stop() = 0;
  // The signal (SIGINT or SIGTERM) that stops the run, 0 for none: the one this process
  // caught, or under mpirun the one the ranks agreed on after the last step or evaluation, so
  // that every rank stops at the same point.
  virtual int stop_requested() const = 0;

  // At the end, per pipeline device: its busy time (each rank timed its own device; the mean
  // of the replicas) and the steps' time (the longest of the ranks').
  virtual void combine_busy_times(std::vector<double>& busy_ms, double& makespan_ms) = 0;
  // How the busy lines name pipeline device d, placed on `placed`.
  virtual std::string device_label(size_t d, const Device& placed) const = 0;
  // The last step's timeline (--trace), whose time 0 is `zero` on this process's clock: the
  // reporter's gets every process's events, on its own clock.
  virtual void gather_timeline(pipeline::Timeline& timeline,
                               std::chrono::steady_clock::time_point zero) = 0;

  // A refusal this process met before the first step (a usage error, a bad input): whether
  // every process met one, so that the reporter alone says it and each exits 2 (true alone).
  // Most are met alike (the same command line, model and data on every rank), at about the
  // same point; one that depends on a rank's own host or environment may be met by it alone,
  // while the others wait for it in a collective: false, and the caller ends the job.
  virtual bool agree_on_refusal() = 0;
  // An error this process alone met (not one every process met alike): a rank ends the whole
  // job naming itself and does not return; a lone process has no one to tell.
  virtual void end_job_for_own_error(const std::string& what) = 0;
};

}  // namespace brigade::train

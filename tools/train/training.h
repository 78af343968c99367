// Training: one run of brigade-train, in three phases that each read top to bottom (internal
// to tools/train; run_training, trainer.h, drives it):
//
//   setup    the constructor (trainer.cpp): everything before the first step; what fails
//            there is a refusal
//   epochs   epochs() (trainer.cpp): epoch by epoch, step by step
//   report   report() (training_report.cpp): the end of the run, what it says and writes
//
// Every question whose answer depends on mpirun goes to TrainingProcesses
// (training_processes.h); the class asks whether it is distributed once, to refuse
// --distributed where the build has no MPI.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/sequential.h"
#include "pipeline/schedule/timeline.h"
#include "tools/data/batches.h"
#include "tools/plot/plot.h"
#include "tools/train/checkpoint.h"
#include "tools/train/evaluate.h"
#include "tools/train/metrics.h"
#include "tools/train/options.h"
#include "tools/train/pipeline_build.h"
#include "tools/train/placement.h"
#include "tools/train/progress.h"
#include "tools/train/staging.h"
#include "tools/train/training_processes.h"

namespace brigade::train {

class Training {
 public:
  using Clock = std::chrono::steady_clock;

  // Setup: the command line's checks, the outputs (the reporter writes every file), the
  // model, this process's pipeline and the data, what the run says it will do, and where it
  // starts (--init-from, --resume). `first_step_began` turns true as the first step begins.
  Training(const Options& options, TrainingProcesses& processes, bool& first_step_began);

  // The epochs from where the run starts (resume_point_) until --epochs, --steps or a stop signal.
  void epochs();
  // The end: the last evaluation and checkpoint, the busy times, --trace, --save, --plot and
  // the summary line; or after a stop signal, the checkpoint and why it stopped. Returns the
  // exit status.
  int report();

 private:
  void keep_checkpoint_microbatches();
  void set_up_pipeline();
  void announce();
  void load_starting_point();

  // A step submitted whose result the host has not read yet (StepRunner::run).
  struct Submitted {
    int64_t epoch = 0, batch = 0, rows = 0;
    Clock::time_point began;
  };
  void epoch(int64_t epoch);
  void step(int64_t epoch, int64_t k);
  void finish_in_flight();  // the submitted step's result, waited for (StepRunner::flush)
  // `r`, the result of `s`: the run goes on past it (its metrics, its progress line).
  void complete(const Submitted& s, pipeline::StepResult& r);
  // Steps submitted so far: those done and the one in flight.
  int64_t submitted_steps() const { return resume_point_.step + (in_flight_ ? 1 : 0); }
  void record_step(int64_t epoch, int64_t k, int64_t rows, double seconds,
                   pipeline::StepResult& result);
  void checkpoint();
  void evaluate_now(int64_t epoch);

  int report_stop(int sig);
  void report_busy_times();
  void draw();
  std::string summary(double wall) const;

  bool limit_reached(int64_t step) const { return o_.steps > 0 && step >= o_.steps; }
  layers::Sequential& model() { return *pipeline_.model; }
  StepRunner& runner() { return *pipeline_.runner; }

  // The members are made in this order and destroyed in reverse: the staging area first (it
  // waits for the fills in flight), the progress (which may end a line) before its file.
  TrainingProcesses& processes_;
  const bool reporter_;  // a lone process, or rank 0: it prints, evaluates and writes
  bool& first_step_began_;

  // Setup: what the run is.
  Options o_;  // the options of this process's pipeline
  model::ModelSpec spec_;
  RunDevices devices_;
  data::Dataset train_, test_;
  std::optional<data::Batcher> batcher_;  // reads train_
  int64_t batches_ = 0;                   // per epoch
  // The rows of a test batch: a training micro-batch's at most, so that the evaluation, one
  // batch forward at a time without a tape, needs no more memory than the step the memory
  // check weighed (the whole --batch at once could not fit where micro-batches were needed).
  int64_t evaluation_rows_ = 0;
  BuiltPipeline pipeline_;
  Recipe recipe_;
  // Only the reporter prints: the others' progress goes to /dev/null.
  std::unique_ptr<FILE, int (*)(FILE*)> quiet_{nullptr, &std::fclose};
  std::optional<Progress> progress_;
  ResumePoint resume_point_;  // where the step after the last one done starts
  std::optional<Submitted> in_flight_;  // submitted, its result not read yet
  Clock::time_point last_known_;  // when the last step's result was read
  MetricsWriter metrics_;

  // What the run has done, for the report.
  std::optional<Evaluation> last_eval_;  // the reporter's
  plot::Series drawn_;                   // this run's steps and evaluations, for --plot
  double last_loss_ = 0;
  int64_t evaluated_at_ = -1;  // the step of the last evaluation: never twice after one step
  std::vector<double> busy_ms_;  // per pipeline device
  double makespan_ms_ = 0;
  pipeline::Timeline last_timeline_;
  std::chrono::steady_clock::time_point last_timeline_zero_;  // its time 0 (for --trace)
  Clock::time_point started_;
  int64_t steps_run_ = 0, samples_run_ = 0;
  std::optional<StagingArea> staging_;  // the next batch, filled while a step runs
};

}  // namespace brigade::train

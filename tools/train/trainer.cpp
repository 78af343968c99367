// run_training (trainer.h) and the first two phases of a Training (training.h): setup and
// epochs.
#include "tools/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cpu/cpu_isa.h"
#include "layers/param_file.h"
#include "tools/machine_load.h"
#include "tools/train/divergence.h"
#include "tools/train/preflight.h"
#include "tools/train/resume_end.h"
#include "tools/train/run_inputs.h"
#include "tools/train/signals.h"
#include "tools/train/suggested_command.h"
#include "tools/train/training.h"

namespace brigade::train {

namespace {

// The batch size nearest `batch` (the larger on a tie) at which every batch of an epoch over
// `count` samples, the last included, has at least `rows` samples (`count` itself does, one
// batch of all), or nothing where the whole set has fewer.
std::optional<int64_t> nearest_whole_batch(int64_t count, int64_t batch, int64_t rows) {
  if (count < rows) return std::nullopt;
  const auto whole = [&](int64_t b) {
    return b >= rows && (b >= count || count % b == 0 || count % b >= rows);
  };
  for (int64_t d = 1; batch + d < count; ++d) {
    if (whole(batch + d)) return batch + d;
    if (batch - d >= 1 && whole(batch - d)) return batch - d;
  }
  return count;
}

}  // namespace

Training::Training(const Options& options, TrainingProcesses& processes, bool& first_step_began)
    : processes_(processes), reporter_(processes.is_reporter()),
      first_step_began_(first_step_began) {
  install_exit_handlers();  // until the loop can stop between steps (install_stop_handlers)
  if (!options.trace.empty() && !options.trace.ends_with(".svg") &&
      !options.trace.ends_with(".json"))
    throw UsageError("--trace '" + options.trace + "': the name must end in .svg or .json");
  if (options.distributed && !processes.distributed())
    throw UsageError(
        "--distributed: this brigade-train was built without MPI (install libopenmpi-dev, "
        "then reconfigure with -Dmpi=enabled)");
  // The reporter writes every file: its refusal of one is every process's.
  processes.on_reporter([&] { check_outputs(options); }, "checking the output files");
  // The CPU kernels read BRIGADE_CPU_ISA on a device's thread, where a bad value would fail
  // as a task of a stream: read here first, a refusal naming the variable.
  try {
    cpu::kernel_isa();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  spec_ = load_model(options.model);
  o_ = processes.pipeline_options(options, spec_);  // under mpirun: P devices, one per rank
  keep_checkpoint_microbatches();
  set_up_pipeline();
  announce();
  load_starting_point();
  if (!o_.metrics.empty() && reporter_)
    metrics_ = MetricsWriter(o_.metrics, o_.resume ? std::optional<int64_t>(resume_point_.step)
                                                   : std::nullopt);
  install_stop_handlers();
}

// --resume with --microbatches auto: the checkpoint's count, which the recipe holds and the run
// must keep, not the count auto gives this run's devices (resumed on other devices or ranks,
// it would be refused). Read by the reporter, taken by every process, marked as the
// checkpoint's for the refusals of it (checkpoint_count_note); nothing is taken where the
// run's own is kept (given, no --resume, no checkpoint that says one).
void Training::keep_checkpoint_microbatches() {
  if (!o_.resume || o_.microbatches > 0) return;
  int64_t m = 0;
  processes_.on_reporter(
      [&] { m = checkpoint_microbatches(o_.checkpoint_dir).value_or(0); },
      "reading the checkpoint's micro-batches");
  m = processes_.from_reporter(m, "the checkpoint's micro-batches");
  if (m <= 0) return;  // loading the checkpoint says why
  o_.microbatches = static_cast<int>(m);
  o_.microbatches_from_checkpoint = true;
  o_.notes.push_back("--microbatches auto: " + std::to_string(m) +
                     ", the checkpoint's (a resumed run keeps its micro-batch count)");
}

// The placement, the micro-batches, the data and the pipeline, each batch checked to hold a
// sample for every micro-batch (of every replica).
void Training::set_up_pipeline() {
  const int replicas = o_.data_parallel;
  devices_ = choose_devices(o_, spec_);
  int stages = 0;  // checked before anything is sized by it, e.g. the micro-batch count
  try {
    stages = pipeline::stage_count(spec_.layers.size(), static_cast<int>(devices_.devices.size()),
                                   o_.chunks);
  } catch (const pipeline::PlanError& e) {
    throw UsageError(e.what());
  }
  const int m = step_microbatches(o_, stages);
  if (o_.batch / replicas < m)
    throw UsageError("--batch " + std::to_string(o_.batch) + " is smaller than the " +
                     std::to_string(m) + " micro-batches of a step" +
                     (replicas > 1 ? " times the " + std::to_string(replicas) + " replicas" : "") +
                     ": every micro-batch needs a sample" + checkpoint_count_note(o_, m));

  // Before the data is read: the training set's size, a recipe entry, at its widest.
  processes_.on_reporter(
      [&] {
        check_output_space(o_, spec_,
                           recipe_of(o_, m, replicas, std::numeric_limits<int64_t>::max()));
      },
      "checking the output files' space");

  train_ = load_split(o_, data::Split::train);
  test_ = load_split(o_, data::Split::test);
  recipe_ = recipe_of(o_, m, replicas, train_.count);
  evaluation_rows_ = (o_.batch / replicas + m - 1) / m;
  check_model_fits_data(spec_, train_);
  batcher_.emplace(train_, data::BatchOptions{
                               .batch_size = o_.batch, .shuffle = !o_.no_shuffle, .seed = o_.seed});
  batches_ = batcher_->batches_per_epoch();
  if (batcher_->batch_rows(batches_ - 1) / replicas < m) {
    const std::optional<int64_t> whole =
        nearest_whole_batch(train_.count, o_.batch, int64_t{m} * replicas);
    Suggestion fix;  // this run's devices (under mpirun, ranks) and micro-batches
    fix.pipeline_devices = static_cast<int>(devices_.devices.size());
    fix.microbatches = m;
    if (whole) fix.flags.emplace_back("--batch", std::to_string(*whole));
    throw UsageError("the last batch of an epoch has " +
                     std::to_string(batcher_->batch_rows(batches_ - 1)) + " samples (" +
                     std::to_string(train_.count) + " mod " + std::to_string(o_.batch) +
                     "), fewer than the " + std::to_string(m) + " micro-batches" +
                     (replicas > 1 ? " of each of " + std::to_string(replicas) + " replicas" : "") +
                     checkpoint_count_note(o_, m) +
                     (whole ? "; the nearest batch size whose every batch has a sample for "
                              "each:\n  " + suggested_command(o_, fix)
                            : std::string()));
  }

  pipeline_ = build_pipeline(o_, spec_, devices_, m,
                             {.first_rows = batcher_->batch_rows(0), .samples = train_.count},
                             processes_);
  busy_ms_.assign(devices_.devices.size(), 0.0);
}

// The first lines: the model and data, the notes on the options, the placement (and on
// stderr, an unbalanced cut), the schedule.
void Training::announce() {
  if (!reporter_) quiet_.reset(std::fopen("/dev/null", "w"));
  const bool live = reporter_ && live_terminal(o_.distributed);
  // On a terminal, lines fit its width; in a file, every field (nothing there wraps).
  const int width = reporter_ && isatty(STDOUT_FILENO) ? terminal_width() : 0;
  progress_.emplace(reporter_ ? stdout : quiet_.get(), live, o_.print_every, width);
  progress_->line("brigade-train: " + o_.model + " (" + std::to_string(model().parameter_count()) +
                  " parameters) on " + train_.name + " (" + std::to_string(train_.count) +
                  " samples), batch " + std::to_string(o_.batch) + ", " + o_.optimizer + " lr " +
                  format_number(o_.lr));
  for (const std::string& note : o_.notes) progress_->line(note);
  // A GPU rank's list holds its GPU and CPU devices standing in for the other ranks' GPUs
  // (distributed.cpp): their threads are nobody's.
  const std::vector<Device>& listed = devices_.devices;
  const bool gpu_ranks = processes_.distributed() &&
                         std::any_of(listed.begin(), listed.end(),
                                     [](const Device& d) { return d.is_cuda(); });
  progress_->line("placement (" + (gpu_ranks ? "GPUs only" : devices_.describe_threads()) +
                  (o_.balance == "blocks" ? "" : ", cut by --balance " + o_.balance) +
                  "):" + pipeline_.placement);
  if (!pipeline_.memory.empty()) progress_->line(pipeline_.memory);
  if (!pipeline_.warning.empty() && reporter_) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", pipeline_.warning.c_str());
  }
  // Read as setup ends: the 1-minute average moves slowly, so it still counts the others.
  const std::string busy =
      tools::busy_machine_warning(tools::read_load_average(), hardware_threads());
  if (!busy.empty() && reporter_) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", busy.c_str());
  }
  progress_->line(runner().describe());
}

// --init-from and --resume, read by the reporter and taken by every process; --save-initial.
void Training::load_starting_point() {
  if (!o_.init_from.empty() || o_.resume) {
    std::optional<safetensors::Dtype> init_dtype;  // what --init-from held, on the reporter
    processes_.on_reporter(
        [&] {
          if (!o_.init_from.empty()) init_dtype = load_if_finite(model().parameters(), o_.init_from);
          if (o_.resume)
            resume_point_ = load_checkpoint(o_.checkpoint_dir, spec_, recipe_,
                                            model().parameters(), runner().optimizers());
        },
        o_.resume ? "reading the checkpoint" : "reading --init-from");
    processes_.broadcast_model(model(), runner(), resume_point_);
    if (init_dtype)
      progress_->line("initial parameters from " + o_.init_from + " (" +
                      std::string(safetensors::dtype_name(*init_dtype)) +
                      (*init_dtype == safetensors::Dtype::BF16 ? ", widened exactly to fp32)" : ")"));
  }
  if (o_.resume) {
    progress_->line("resumed from " + checkpoint_path(o_.checkpoint_dir) + " at step " +
                    std::to_string(resume_point_.step) + " (epoch " +
                    std::to_string(resume_point_.epoch + 1) + ", batch " +
                    std::to_string(resume_point_.batch) + ")");
    check_resume_leaves_steps(resume_point_, {o_.epochs, o_.steps, batches_},
                              checkpoint_path(o_.checkpoint_dir));
  }
  if (!o_.save_initial.empty() && reporter_)
    layers::save_parameters(model().parameters(), o_.save_initial);
}

void Training::epochs() {
  drawn_.name = std::filesystem::path(o_.model).stem().string();
  started_ = Clock::now();
  staging_.emplace(*batcher_, runner().staging());
  for (int64_t e = resume_point_.epoch; e < o_.epochs && !limit_reached(resume_point_.step); ++e) {
    epoch(e);
    if (processes_.stop_requested()) break;
    if (resume_point_.batch == batches_) {  // the epoch is complete
      evaluate_now(e);
      // A stop abandoned that evaluation: the checkpoint stays at the epoch's end, as for a
      // stop before it, so that a --resume evaluates it first.
      if (processes_.stop_requested()) break;
      resume_point_.epoch = e + 1;
      resume_point_.batch = 0;
    }
  }
}

// The steps of `epoch` from resume_point_.batch on, until its end, --steps or a stop signal.
void Training::epoch(int64_t epoch) {
  // The batch this run stops before in this epoch: its end, or sooner by --steps.
  int64_t stop_batch = batches_;
  if (o_.steps > 0) {
    const int64_t steps_left = std::max<int64_t>(0, o_.steps - resume_point_.step);
    stop_batch = std::min(stop_batch, resume_point_.batch + steps_left);
  }
  progress_->start_epoch(epoch, o_.epochs, batches_, resume_point_.batch, stop_batch);
  for (int64_t k = resume_point_.batch; k < batches_; ++k) {
    if (processes_.stop_requested() || limit_reached(submitted_steps())) break;
    step(epoch, k);
  }
  finish_in_flight();  // the epoch's end, --steps or a stop signal: its last step's result
  progress_->end_epoch();
}

// Batch k of `epoch`, with the next batch staged while it runs; the result of the step
// before it where the runtime left that one pending (StepRunner::run), else its own; then the
// checkpoint and evaluation due after it, which wait for it first.
void Training::step(int64_t epoch, int64_t k) {
  StagingArea& staging = *staging_;
  if (!staging.has_staged()) staging.stage(epoch, k);  // the first step of this run
  StagingArea::Slot& slot = staging.take();
  const int64_t number = submitted_steps();  // from 0
  // The next batch fills on the staging stream while this step runs.
  const bool last_in_epoch = k + 1 == batches_;
  if (!limit_reached(number + 1) && !(last_in_epoch && epoch + 1 == o_.epochs))
    staging.stage(last_in_epoch ? epoch + 1 : epoch, last_in_epoch ? 0 : k + 1);

  first_step_began_ = true;
  const Submitted submitted{.epoch = epoch, .batch = k, .rows = slot.rows, .began = Clock::now()};
  const std::optional<Submitted> before = std::exchange(in_flight_, submitted);
  std::optional<pipeline::StepResult> r = naming_divergence([&] {
    try {
      return runner().run(staging, slot, static_cast<uint32_t>(number));
    } catch (const pipeline::PipelineError& e) {
      // This step failed before it was enqueued whole, and the call finished the step before
      // it, cleanly: that step is reported (its line, its metrics) before this failure is.
      if (before && e.completed()) {
        pipeline::StepResult done = *e.completed();
        complete(*before, done);
      }
      throw;
    }
  });
  if (r && before) {
    complete(*before, *r);
  } else if (r) {  // this step's own: nothing stays in flight
    in_flight_.reset();
    complete(submitted, *r);
  }
  const bool checkpoint_due = o_.checkpoint_every > 0 && (number + 1) % o_.checkpoint_every == 0;
  const bool eval_due = o_.eval_every > 0 && (number + 1) % o_.eval_every == 0;
  if (!checkpoint_due && !eval_due) return;
  finish_in_flight();  // both read the parameters after this step
  if (checkpoint_due) checkpoint();
  if (eval_due) evaluate_now(epoch);
}

void Training::finish_in_flight() {
  if (!in_flight_) return;
  const Submitted s = *std::exchange(in_flight_, std::nullopt);
  std::optional<pipeline::StepResult> r = naming_divergence([&] { return runner().flush(); });
  if (r) complete(s, *r);
}

void Training::complete(const Submitted& s, pipeline::StepResult& r) {
  // One rank's Ctrl-C stops every rank after this step; --metrics writes every rank's peaks.
  processes_.agree_on_step(r, !o_.metrics.empty());
  // Read on the host already: checking it costs no synchronisation. Nothing of this step is
  // reported, and no checkpoint is written after it. Every process sees the agreed loss.
  if (!std::isfinite(r.loss))
    throw AllRanksError(
        diverged(resume_point_.step + 1, "the loss is " + format_value(r.loss)), 1);
  // Its time: from its submission, or from when the step before it was known, if later (it
  // ran behind that one).
  const Clock::time_point now = Clock::now();
  const double seconds =
      std::chrono::duration<double>(now - std::max(s.began, last_known_)).count();
  last_known_ = now;
  resume_point_.step += 1;
  resume_point_.batch = s.batch + 1;
  ++steps_run_;
  record_step(s.epoch, s.batch, s.rows, seconds, r);
}

// A step's busy times and timeline (for the report), its metrics, plot point and progress.
void Training::record_step(int64_t epoch, int64_t k, int64_t rows, double seconds,
                           pipeline::StepResult& r) {
  const pipeline::TimelineStats stats = pipeline::measure(r.timeline);
  for (size_t d = 0; d < stats.devices.size() && d < busy_ms_.size(); ++d)
    busy_ms_[d] += stats.devices[d].busy;
  makespan_ms_ += stats.makespan;
  last_timeline_ = std::move(r.timeline);
  last_timeline_zero_ = r.timeline_zero;
  const double rate = static_cast<double>(rows) / seconds;
  const double acc = static_cast<double>(r.correct) / static_cast<double>(rows);
  metrics_.step(resume_point_.step, epoch, k, r.loss, acc, rate, r.sent_bytes, r.peak_memory);
  drawn_.steps.push_back({resume_point_.step, r.loss, acc});
  progress_->step(k, rows, r.loss, r.correct);
  last_loss_ = r.loss;
  samples_run_ += rows;
}

// A checkpoint at resume_point_ (with --checkpoint-dir); a refused one (a NaN or an Inf) ends
// every process alike.
void Training::checkpoint() {
  if (o_.checkpoint_dir.empty()) return;
  processes_.gather_model(model(), runner());
  processes_.on_reporter(
      [&] {
        save_checkpoint(o_.checkpoint_dir, spec_, recipe_, resume_point_, model().parameters(),
                        runner().optimizers());
      },
      "writing the checkpoint");
}

// The test set after the step at resume_point_, at most once per step.
void Training::evaluate_now(int64_t epoch) {
  if (evaluated_at_ == resume_point_.step) return;
  evaluated_at_ = resume_point_.step;
  processes_.gather_model(model(), runner());
  processes_.on_reporter(
      [&] {
        // A stop signal this process caught abandons it (the processes agree on it after).
        const std::optional<Evaluation> evaluated =
            evaluate(model(), test_, evaluation_rows_, [] { return stop_signal() != 0; });
        if (!evaluated) return;
        const Evaluation& e = *evaluated;
        if (!std::isfinite(e.loss))
          throw std::runtime_error(
              diverged(resume_point_.step, "the test loss after it is " + format_value(e.loss)));
        char line[160];
        std::snprintf(line, sizeof line,
                      "step %lld (epoch %lld): test loss %.4f, test accuracy %.2f%%",
                      static_cast<long long>(resume_point_.step), static_cast<long long>(epoch + 1),
                      e.loss, 100 * e.accuracy);
        progress_->line(line);
        metrics_.eval(resume_point_.step, epoch, e.loss, e.accuracy);
        drawn_.evals.push_back({resume_point_.step, e.loss, e.accuracy});
        last_eval_ = e;
      },
      "evaluating");
  processes_.agree_on_stop();
}

int run_training(const Options& options, TrainingProcesses& processes) {
  bool first_step_began = false;
  try {
    Training run(options, processes, first_step_began);
    run.epochs();
    return run.report();
  } catch (const UsageError&) {
    throw;
  } catch (const AllRanksError& e) {
    if (!first_step_began) throw AllRanksError(e.what(), 2);
    throw;
  } catch (const std::exception& e) {
    if (!first_step_began) throw InputError(e.what());
    throw;
  }
}

}  // namespace brigade::train

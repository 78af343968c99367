#include "tools/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "layers/param_file.h"
#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/svg.h"
#include "tools/data/batches.h"
#include "tools/models/find_model.h"
#include "tools/plot/plot.h"
#include "tools/train/checkpoint.h"
#include "tools/train/evaluate.h"
#include "tools/train/finite.h"
#include "tools/train/metrics.h"
#include "tools/train/pipeline_build.h"
#include "tools/train/placement.h"
#include "tools/train/preflight.h"
#include "tools/train/progress.h"
#include "tools/train/runners.h"
#include "tools/train/signals.h"
#include "tools/train/staging.h"

#ifndef BRIGADE_MODELS_DIR
#define BRIGADE_MODELS_DIR "tools/models"
#endif

namespace brigade::train {

namespace {

using Clock = std::chrono::steady_clock;

// --model NAME|FILE: an existing file, else tools/models/NAME.model (tools/models/find_model.h).
model::ModelSpec load_model(const std::string& name) {
  const std::string file = models::find_model(name, BRIGADE_MODELS_DIR);
  if (file.empty())
    throw UsageError("--model '" + name + "': no such file, and no model of that name in " +
                     std::string(BRIGADE_MODELS_DIR) + " (" +
                     models::shipped_models(BRIGADE_MODELS_DIR) + ")");
  return model::load_model_file(file);
}

// The model must read the data's images and give one logit per class.
void check_model_fits_data(const model::ModelSpec& spec, const data::Dataset& d) {
  const std::vector<int64_t> input = {1, d.channels, d.height, d.width};
  if (spec.input != input)
    throw UsageError("the model's input is " + model::format_dims(spec.input) + " but " + d.name +
                     " has images " + model::format_dims(input) + " (write `input " +
                     std::to_string(d.height) + "x" + std::to_string(d.width) + "x" +
                     std::to_string(d.channels) + "`)");
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const std::vector<int64_t> output = {1, d.classes};
  if (shapes.layers.back().output != output)
    throw UsageError("the model's output is " + model::format_dims(shapes.layers.back().output) +
                     " but " + d.name + " has " + std::to_string(d.classes) +
                     " classes: the last layer should be `dense units=" +
                     std::to_string(d.classes) + " activation=softmax`");
}

data::Dataset load_split(const Options& o, data::Split split) {
  if (o.data == "synthetic" && o.synthetic_count > 0) {
    const int64_t n = split == data::Split::train ? o.synthetic_count
                                                  : std::max<int64_t>(1, o.synthetic_count / 6);
    return data::make_synthetic(split, o.seed, n);
  }
  return data::load_dataset(o.data, o.data_dir.empty() ? data::kFashionMnistDir : o.data_dir,
                            split, o.seed);
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// What a resumed run must share with the run that wrote the checkpoint.
Recipe recipe_of(const Options& o, int microbatches) {
  char lr[32], mom[32], wd[32];
  std::snprintf(lr, sizeof lr, "%.17g", o.lr);
  std::snprintf(mom, sizeof mom, "%.17g", o.momentum);
  std::snprintf(wd, sizeof wd, "%.17g", o.weight_decay);
  Recipe r = {{"seed", std::to_string(o.seed)},       {"batch", std::to_string(o.batch)},
              {"shuffle", o.no_shuffle ? "no" : "yes"}, {"data", o.data},
              {"synthetic_count", std::to_string(o.synthetic_count)},
              {"optimizer", o.optimizer},             {"lr", lr},
              {"momentum", mom},                      {"weight_decay", wd},
              {"microbatches", std::to_string(microbatches)}};
  if (o.clip_grad_norm > 0) {  // absent when off: checkpoints of earlier runs still resume
    char clip[32];
    std::snprintf(clip, sizeof clip, "%.17g", o.clip_grad_norm);
    r["clip_grad_norm"] = clip;
  }
  return r;
}

// Replicas sum their gradients in another order than one process: a checkpoint says D.
Recipe recipe_of(const Options& o, int microbatches, int replicas) {
  Recipe r = recipe_of(o, microbatches);
  if (replicas > 1) r["data_parallel"] = std::to_string(replicas);
  return r;
}

void write_trace(const std::string& path, const pipeline::Timeline& t) {
  if (path.ends_with(".svg")) pipeline::write_svg({t}, path);
  else pipeline::write_chrome_trace(t, path);
}

// The run; `first_step_began` turns true as the first step begins: an error before it is a refusal
// (run_training). Whatever depends on mpirun is asked of `processes` (training_processes.h).
int train(const Options& options, TrainingProcesses& processes, bool& first_step_began) {
  if (!options.trace.empty() && !options.trace.ends_with(".svg") &&
      !options.trace.ends_with(".json"))
    throw UsageError("--trace '" + options.trace + "': the name must end in .svg or .json");
  if (options.distributed && !processes.distributed())
    throw UsageError(
        "--distributed: this brigade-train was built without MPI (install libopenmpi-dev, "
        "then reconfigure with -Dmpi=enabled)");
  const bool reporter = processes.is_reporter();  // a lone process, or rank 0
  if (reporter) check_outputs(options);           // the reporter writes every file
  const model::ModelSpec spec = load_model(options.model);
  if (reporter) check_output_space(options, spec);
  const Options o = processes.pipeline_options(options, spec);  // mpirun: P devices, one per rank
  const int replicas = o.data_parallel;
  const Placement placement = place(o, spec);
  const int stages = static_cast<int>(placement.devices.size()) * o.chunks;
  const int m = o.microbatches > 0 ? o.microbatches : (stages == 1 ? 1 : 2 * stages);
  if (o.batch / replicas < m)
    throw UsageError("--batch " + std::to_string(o.batch) + " is smaller than the " +
                     std::to_string(m) + " micro-batches of a step" +
                     (replicas > 1 ? " times the " + std::to_string(replicas) + " replicas" : "") +
                     ": every micro-batch needs a sample");

  const data::Dataset train = load_split(o, data::Split::train);
  const data::Dataset test = load_split(o, data::Split::test);
  check_model_fits_data(spec, train);
  data::Batcher batcher(train, {.batch_size = o.batch, .shuffle = !o.no_shuffle, .seed = o.seed});
  const int64_t batches = batcher.batches_per_epoch();
  if (batcher.batch_rows(batches - 1) / replicas < m)
    throw UsageError("the last batch of an epoch has " +
                     std::to_string(batcher.batch_rows(batches - 1)) + " samples (" +
                     std::to_string(train.count) + " mod " + std::to_string(o.batch) +
                     "), fewer than the " + std::to_string(m) + " micro-batches" +
                     (replicas > 1 ? " of each of " + std::to_string(replicas) + " replicas" : ""));

  BuiltPipeline setup = build_pipeline(o, spec, placement, m, batcher.batch_rows(0), processes);
  layers::Sequential& model = *setup.model;
  StepRunner& runner = *setup.runner;
  const std::vector<CheckpointedOptimizer*> optimizers = runner.optimizers();
  const Recipe recipe = recipe_of(o, m, replicas);

  // Only the reporter prints: the others' progress goes nowhere.
  const std::unique_ptr<FILE, int (*)(FILE*)> quiet(
      reporter ? nullptr : std::fopen("/dev/null", "w"), &std::fclose);
  const bool live = reporter && live_terminal(o.distributed);
  Progress progress(reporter ? stdout : quiet.get(), live, o.print_every);
  progress.line("brigade-train: " + o.model + " (" + std::to_string(model.parameter_count()) +
                " parameters) on " + train.name + " (" + std::to_string(train.count) +
                " samples), batch " + std::to_string(o.batch) + ", " + o.optimizer + " lr " +
                format_number(o.lr));
  for (const std::string& note : o.notes) progress.line(note);
  progress.line("placement (" + std::to_string(placement.threads_per_device) + " thread" +
                (placement.threads_per_device == 1 ? "" : "s") + " per CPU device" +
                (o.balance == "blocks" ? "" : ", cut by --balance " + o.balance) +
                "): " + setup.placement);
  if (!setup.warning.empty() && reporter) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", setup.warning.c_str());
  }
  progress.line(runner.describe());

  Position pos;
  if (!o.init_from.empty() || o.resume) {
    processes.on_reporter(
        [&] {
          if (!o.init_from.empty()) load_if_finite(model.parameters(), o.init_from);
          if (o.resume)
            pos = load_checkpoint(o.checkpoint_dir, spec, recipe, model.parameters(), optimizers);
        },
        o.resume ? "reading the checkpoint" : "reading --init-from");
    processes.broadcast_model(model, runner, pos);
  }
  if (o.resume) {
    progress.line("resumed from " + checkpoint_path(o.checkpoint_dir) + " at step " +
                  std::to_string(pos.step) + " (epoch " + std::to_string(pos.epoch + 1) +
                  ", batch " + std::to_string(pos.batch) + ")");
  }
  if (!o.save_initial.empty() && reporter) layers::save_parameters(model.parameters(), o.save_initial);
  MetricsWriter metrics =
      o.metrics.empty() || !reporter ? MetricsWriter() : MetricsWriter(o.metrics, o.resume);
  install_stop_handlers();

  const auto checkpoint = [&](const Position& at) {
    if (o.checkpoint_dir.empty()) return;
    processes.gather_model(model, runner);
    processes.on_reporter(  // a refused checkpoint (a NaN or an Inf) ends every rank alike
        [&] {
          save_checkpoint(o.checkpoint_dir, spec, recipe, at, model.parameters(), optimizers);
        },
        "writing the checkpoint");
  };
  std::optional<Evaluation> last_eval;  // rank 0's, for the summary
  plot::Series drawn;                   // this run's steps and evaluations, for --plot
  drawn.name = std::filesystem::path(o.model).stem().string();
  // --plot: the metrics file's whole history if there is one (a resumed run's too), else
  // what this run did.
  const auto draw = [&] {
    if (o.plot.empty() || !reporter) return;
    const plot::Series run = o.metrics.empty() ? drawn : plot::read_metrics(o.metrics);
    plot::write_svg({run}, "brigade-train: " + o.model + ", " + o.optimizer + " lr " +
                               format_number(o.lr) + ", batch " + std::to_string(o.batch),
                    o.plot);
    progress.line("plot of the run: " + o.plot);
  };
  double last_loss = 0;
  int64_t evaluated_at = -1;  // the step of the last evaluation: never twice after one step
  const auto evaluation = [&](int64_t epoch) {
    if (evaluated_at == pos.step) return;
    evaluated_at = pos.step;
    processes.gather_model(model, runner);
    processes.on_reporter(
        [&] {
          const Evaluation e = evaluate(model, test, o.batch);
          if (!std::isfinite(e.loss))
            throw std::runtime_error(
                diverged(pos.step, "the test loss after it is " + format_value(e.loss)));
          char line[160];
          std::snprintf(line, sizeof line, "epoch %lld: test loss %.4f, test accuracy %.2f%%",
                        static_cast<long long>(epoch + 1), e.loss, 100 * e.accuracy);
          progress.line(line);
          metrics.eval(pos.step, epoch, e.loss, e.accuracy);
          drawn.evals.push_back({pos.step, e.loss, e.accuracy});
          last_eval = e;
        },
        "evaluating");
  };

  std::vector<double> busy_ms(placement.devices.size(), 0.0);
  double makespan_ms = 0;
  pipeline::Timeline last_timeline;
  const auto limit_reached = [&](int64_t step) { return o.steps > 0 && step >= o.steps; };
  const auto started = Clock::now();
  int64_t steps_run = 0, samples_run = 0;
  const auto stopped = [&] { return processes.stop_requested(); };

  StagingArea staging(batcher, runner.staging());
  for (int64_t epoch = pos.epoch; epoch < o.epochs && !limit_reached(pos.step); ++epoch) {
    progress.start_epoch(epoch, o.epochs, batches, pos.batch);
    for (int64_t k = pos.batch; k < batches; ++k) {
      if (stopped() || limit_reached(pos.step)) break;
      if (!staging.has_staged()) staging.stage(epoch, k);  // the first step of this run
      StagingArea::Slot& slot = staging.take();
      // The next batch fills on the staging stream while this step runs.
      const bool last_in_epoch = k + 1 == batches;
      if (!limit_reached(pos.step + 1) && !(last_in_epoch && epoch + 1 == o.epochs))
        staging.stage(last_in_epoch ? epoch + 1 : epoch, last_in_epoch ? 0 : k + 1);

      const auto t0 = Clock::now();
      first_step_began = true;
      pipeline::StepResult r = run_step(runner, staging, slot, pos.step);  // finite.h
      processes.agree_on_step(r);  // one rank's Ctrl-C stops every rank after this step
      // Read on the host already: checking it costs no synchronisation. Nothing of this step
      // is reported, and no checkpoint is written after it. Every process sees the agreed loss.
      if (!std::isfinite(r.loss))
        throw AllRanksError(diverged(pos.step + 1, "the loss is " + format_value(r.loss)), 1);
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      pos.step += 1;
      pos.batch = k + 1;
      ++steps_run;

      const pipeline::TimelineStats stats = pipeline::measure(r.timeline);
      for (size_t d = 0; d < stats.devices.size() && d < busy_ms.size(); ++d)
        busy_ms[d] += stats.devices[d].busy;
      makespan_ms += stats.makespan;
      last_timeline = std::move(r.timeline);
      const double rate = static_cast<double>(slot.rows) / seconds;
      const double acc = static_cast<double>(r.correct) / static_cast<double>(slot.rows);
      metrics.step(pos.step, epoch, k, r.loss, acc, rate, r.peak_memory);
      drawn.steps.push_back({pos.step, r.loss, acc});
      progress.step(k, slot.rows, r.loss, r.correct);
      last_loss = r.loss;
      samples_run += slot.rows;
      if (o.checkpoint_every > 0 && pos.step % o.checkpoint_every == 0) checkpoint(pos);
      if (o.eval_every > 0 && pos.step % o.eval_every == 0) evaluation(epoch);
    }
    progress.end_epoch();
    if (stopped()) break;
    if (pos.batch == batches) {  // the epoch is complete
      evaluation(epoch);
      pos.epoch = epoch + 1;
      pos.batch = 0;
    }
  }

  if (const int sig = stopped()) {
    checkpoint(pos);
    progress.line(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                  " after step " + std::to_string(pos.step) +
                  (o.checkpoint_dir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                            : "; checkpoint in " + checkpoint_path(o.checkpoint_dir)));
    draw();
    return 128 + sig;
  }
  if (pos.batch != 0) evaluation(pos.epoch);  // stopped early by --steps: still say how good
  checkpoint(pos);

  const double wall = std::chrono::duration<double>(Clock::now() - started).count();
  char line[200];
  processes.combine_busy_times(busy_ms, makespan_ms);  // mpirun: each rank timed its own
  if (makespan_ms > 0) {
    double busy_total = 0;
    for (size_t d = 0; d < busy_ms.size(); ++d) {
      std::snprintf(line, sizeof line, "  %s busy %.1f s (%.1f%% of the steps' time)",
                    processes.device_label(d, placement.devices[d]).c_str(), busy_ms[d] / 1000,
                    100 * busy_ms[d] / makespan_ms);
      progress.line(line);
      busy_total += busy_ms[d];
    }
    std::snprintf(line, sizeof line, "  measured bubble: %.1f%% (idle / (devices x step time))",
                  100 * (1 - busy_total / (static_cast<double>(busy_ms.size()) * makespan_ms)));
    progress.line(line);
  }
  if (!o.trace.empty() && !last_timeline.events.empty() && reporter) {
    write_trace(o.trace, last_timeline);
    progress.line("trace of the last step: " + o.trace);
  }
  if (!o.save.empty()) {
    processes.gather_model(model, runner);
    processes.on_reporter([&] { save_if_finite(model.parameters(), o.save, pos.step); },
                          "writing --save");
    progress.line("parameters saved to " + o.save);
  }
  // The last line says how the run went: steps, time, speed, the last step's loss, the last
  // evaluation.
  int n = std::snprintf(line, sizeof line, "done: %lld step%s in %s (%.1f s), %.0f samples/s",
                        static_cast<long long>(steps_run), steps_run == 1 ? "" : "s",
                        Progress::format_duration(wall).c_str(),
                        wall, wall > 0 ? static_cast<double>(samples_run) / wall : 0.0);
  if (steps_run > 0)
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), ", last loss %.4f",
                       last_loss);
  if (last_eval)
    std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                  "; test set: loss %.4f, accuracy %.2f%%", last_eval->loss,
                  100 * last_eval->accuracy);
  draw();
  progress.line(line);
  return 0;
}

}  // namespace

int run_training(const Options& options, TrainingProcesses& processes) {
  bool started = false;
  try {
    return train(options, processes, started);
  } catch (const UsageError&) {
    throw;
  } catch (const AllRanksError& e) {
    if (!started) throw AllRanksError(e.what(), 2);
    throw;
  } catch (const std::exception& e) {
    if (!started) throw InputError(e.what());
    throw;
  }
}

}  // namespace brigade::train

// The third phase of a Training (training.h): the end of the run, what it says and writes.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "engine/output_file.h"
#include "pipeline/schedule/chrome_trace.h"
#include "pipeline/schedule/svg.h"
#include "tools/train/divergence.h"
#include "tools/train/training.h"

namespace brigade::train {

namespace {

void write_trace(const std::string& path, const pipeline::Timeline& t) {
  write_whole_file(path, path.ends_with(".svg") ? pipeline::timeline_svg({t})
                                                : pipeline::chrome_trace_json(t) + "\n");
}

}  // namespace

int Training::report() {
  if (const int sig = processes_.stop_requested()) return report_stop(sig);
  // Stopped early by --steps: still say how good. A stop asked for while that evaluation ran
  // (a large test set takes a while) is a stop: the run says so and ends as stopped.
  if (resume_point_.batch != 0) {
    evaluate_now(resume_point_.epoch);
    if (const int sig = processes_.stop_requested()) return report_stop(sig);
  }
  checkpoint();
  metrics_.close();  // its last line written: synced and closed, checked
  const double wall = std::chrono::duration<double>(Clock::now() - started_).count();
  report_busy_times();
  // Every process takes part: under mpirun the reporter draws every rank's events.
  if (!o_.trace.empty()) processes_.gather_timeline(last_timeline_, last_timeline_zero_);
  if (!o_.trace.empty() && !last_timeline_.events.empty() && reporter_) {
    write_trace(o_.trace, last_timeline_);
    progress_->line("trace of the last step: " + o_.trace);
  }
  if (!o_.save.empty()) {
    processes_.gather_model(model(), runner());
    processes_.on_reporter(
        [&] { save_if_finite(model().parameters(), o_.save, resume_point_.step, save_dtype(o_)); },
        "writing --save");
    progress_->line("parameters saved to " + o_.save + " (" +
                    std::string(safetensors::dtype_name(save_dtype(o_))) + ")");
  }
  draw();
  progress_->line(summary(wall));
  return 0;
}

// Stopped by SIGINT or SIGTERM between steps or during an evaluation: the checkpoint, then
// 128 + the signal, as a shell reports a killed program.
int Training::report_stop(int sig) {
  checkpoint();
  metrics_.close();
  const std::string saved = o_.checkpoint_dir.empty()
                                ? " (no --checkpoint-dir: nothing saved)"
                                : "; checkpoint in " + checkpoint_path(o_.checkpoint_dir);
  progress_->line(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                  " after step " + std::to_string(resume_point_.step) + saved);
  draw();
  return 128 + sig;
}

// Each pipeline device's busy time and the measured bubble, from the steps' timelines.
void Training::report_busy_times() {
  processes_.combine_busy_times(busy_ms_, makespan_ms_);  // under mpirun: each rank's own
  if (makespan_ms_ <= 0) return;
  char line[200];
  double busy_total = 0;
  for (size_t d = 0; d < busy_ms_.size(); ++d) {
    std::snprintf(line, sizeof line, "  %s busy %.1f s (%.1f%% of the steps' time)",
                  processes_.device_label(d, devices_.devices[d]).c_str(), busy_ms_[d] / 1000,
                  100 * busy_ms_[d] / makespan_ms_);
    progress_->line(line);
    busy_total += busy_ms_[d];
  }
  std::snprintf(line, sizeof line, "  measured bubble: %.1f%% (idle / (devices x step time))",
                100 * (1 - busy_total / (static_cast<double>(busy_ms_.size()) * makespan_ms_)));
  progress_->line(line);
}

// --plot: the metrics file's whole history if there is one (a resumed run's too), else what
// this run did.
void Training::draw() {
  if (o_.plot.empty() || !reporter_) return;
  // From the metrics file, which holds a resumed run's earlier steps too; but a device or a
  // pipe (`--metrics /dev/stdout`) is not read back: then this run's own steps.
  std::error_code ec;
  const bool from_file = !o_.metrics.empty() && std::filesystem::is_regular_file(o_.metrics, ec);
  const plot::Series run = from_file ? plot::read_metrics(o_.metrics) : drawn_;
  write_whole_file(o_.plot, plot::render_svg({run}, "brigade-train: " + o_.model + ", " +
                                                        o_.optimizer + " lr " +
                                                        format_number(o_.lr) + ", batch " +
                                                        std::to_string(o_.batch)));
  progress_->line("plot of the run: " + o_.plot);
}

// The last line says how the run went: steps, time, speed, the last step's loss, the last
// evaluation.
std::string Training::summary(double wall) const {
  char line[200];
  int n = std::snprintf(line, sizeof line, "done: %lld step%s in %s (%.1f s), %.0f samples/s",
                        static_cast<long long>(steps_run_), steps_run_ == 1 ? "" : "s",
                        Progress::format_duration(wall).c_str(), wall,
                        wall > 0 ? static_cast<double>(samples_run_) / wall : 0.0);
  if (steps_run_ > 0)
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), ", last loss %.4f",
                       last_loss_);
  if (last_eval_)
    std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                  "; test set: loss %.4f, accuracy %.2f%%", last_eval_->loss,
                  100 * last_eval_->accuracy);
  return line;
}

}  // namespace brigade::train

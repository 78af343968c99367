// Progress: what a person watching the run sees.
//
// On a terminal (isatty, and not under mpirun, whose ranks write into a pseudo-terminal that
// may well be a log file; TERM=dumb counts as no terminal), a live bar per epoch, redrawn in
// place:
//   epoch 2/5 [#########.........] 212/469  loss 0.4123  mean 0.4501 (steps 1-212)  acc 85.1%  1510 samples/s  ETA 0:21
// Elsewhere (a log file, CI, mpirun), plain lines without control codes: the first step of
// the run, every --print-every steps, and the last step of each epoch or of the run:
//   epoch 2/5 step 212/469  loss 0.4123  mean 0.4501 (steps 1-212)  acc 85.1%  1510 samples/s
// `loss` is the step's own; `mean` the sample-weighted mean of the steps of this epoch that
// this run made (after --resume, from the step it resumed at), named by their range; `acc`
// and samples/s are over the same steps.
//
// A line written to a terminal fits its width (terminal_width()): a line longer than the
// terminal wraps, and a live bar redrawn with \r then overwrites only its last row, leaving a
// trail of half-lines. format_progress_line() gives up the least useful fields first. A log
// file gets every field.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace brigade::train {

// What one progress line says, before it is fitted to a width.
struct ProgressFields {
  int64_t epoch = 1, epochs = 1;  // 1-based
  int64_t step = 1, steps = 1;    // 1-based step of the epoch; the epoch's steps
  double loss = 0;                // this step's
  double mean = 0;                // over steps first_step..step of this epoch
  int64_t first_step = 1;
  std::optional<double> accuracy_percent;  // none before any sample was counted
  double samples_per_s = 0;
  bool bar = false;               // the live bar ("[###...] k/n"), else "step k/n"
  std::optional<double> eta_s;    // the live bar's estimate of the epoch's end (or --steps')
};

// The progress line in at most `width` columns (0: no limit, every field). Fields go, in
// this order, until it fits: the mean's step range, bar width (down to 8 cells), the mean,
// samples/s, the bar, the accuracy; the epoch, step, loss and ETA stay, cut at `width` only
// on a terminal too narrow even for them.
std::string format_progress_line(const ProgressFields& fields, int width);

// The columns of the terminal on stdout, else on stderr (ioctl TIOCGWINSZ); else $COLUMNS;
// else 80.
int terminal_width();

class Progress {
 public:
  // `width`: the columns each line must fit in (0: no limit, e.g. a log file).
  Progress(std::FILE* out, bool live, int64_t print_every, int width);
  // Ends a live bar's line, so that an error (stderr) that stops the run starts a line.
  ~Progress() { end_epoch(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `stop_batch`: the batch the run stops before in this epoch (`batches`, or sooner by
  // --steps), where the live bar's ETA counts to.
  void start_epoch(int64_t epoch, int64_t epochs, int64_t batches, int64_t first_batch,
                   int64_t stop_batch);
  // After batch k (0-based) of the epoch: its rows, loss, correct count.
  void step(int64_t k, int64_t rows, double loss, int64_t correct);
  // The epoch (or the run) ends: off a terminal, the last step's line if not printed yet.
  void end_epoch();
  // A line of its own (evaluation results, messages), clearing a live bar first.
  void line(const std::string& text);

  static std::string format_duration(double seconds);  // "1:05", "1:02:03"

 private:
  ProgressFields fields() const;  // of the last step seen
  void print_plain();

  std::FILE* out_;
  bool live_;
  int64_t print_every_;
  int width_;
  int64_t epoch_ = 0, epochs_ = 0, batches_ = 0, first_batch_ = 0, stop_batch_ = 0;
  int64_t last_k_ = -1;     // the last batch seen this epoch
  bool last_printed_ = true;
  bool first_of_run_ = true;
  double last_loss_ = 0, loss_sum_ = 0;
  int64_t rows_ = 0, correct_ = 0;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Whether the live bar may be drawn on stdout: a terminal, not under mpirun, TERM not dumb.
bool live_terminal(bool distributed);

}  // namespace brigade::train

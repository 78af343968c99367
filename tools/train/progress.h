// Progress: what a person watching the run sees.
//
// On a terminal (isatty), a live bar per epoch, redrawn in place:
//   epoch 2/5 [#########.........]  212/469  loss 0.4123  acc 85.1%  1510 samples/s  ETA 0:21
// Off a terminal (a log file, CI), one plain line every --print-every steps and at the end of
// the epoch, so logs stay readable:
//   epoch 2/5 step 212/469 loss 0.4123 acc 85.1% 1510 samples/s
// The loss, accuracy and samples/s shown are running means over the epoch so far (the loss and
// accuracy sample-weighted).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace brigade::train {

class Progress {
 public:
  Progress(std::FILE* out, bool live, int64_t print_every);
  // Ends a live bar's line, so that an error (stderr) that stops the run starts a line.
  ~Progress() { end_epoch(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void start_epoch(int64_t epoch, int64_t epochs, int64_t batches, int64_t first_batch);
  // After batch k (0-based) of the epoch: its rows, mean loss, correct count (-1: unknown).
  void step(int64_t k, int64_t rows, double loss, int64_t correct);
  void end_epoch();
  // A line of its own (evaluation results, messages), clearing a live bar first.
  void line(const std::string& text);

  static std::string format_duration(double seconds);  // "1:05", "1:02:03"

 private:
  std::string status(int64_t k) const;

  std::FILE* out_;
  bool live_;
  int64_t print_every_;
  int64_t epoch_ = 0, epochs_ = 0, batches_ = 0, first_batch_ = 0;
  double loss_sum_ = 0;
  int64_t rows_ = 0, correct_ = 0;
  bool accuracy_known_ = true, bar_shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace brigade::train

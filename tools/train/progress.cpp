#include "tools/train/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace brigade::train {

bool live_terminal(bool distributed) {
  const char* term = std::getenv("TERM");
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
                            std::getenv("PMIX_RANK");
  return isatty(STDOUT_FILENO) && !distributed && !under_mpirun &&
         !(term && std::strcmp(term, "dumb") == 0);
}

Progress::Progress(std::FILE* out, bool live, int64_t print_every)
    : out_(out), live_(live), print_every_(print_every) {}

std::string Progress::format_duration(double seconds) {
  const long s = seconds > 0 ? static_cast<long>(seconds + 0.5) : 0;
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

void Progress::start_epoch(int64_t epoch, int64_t epochs, int64_t batches, int64_t first_batch) {
  epoch_ = epoch, epochs_ = epochs, batches_ = batches, first_batch_ = first_batch;
  last_k_ = -1, last_printed_ = true;
  loss_sum_ = 0, rows_ = 0, correct_ = 0;
  start_ = std::chrono::steady_clock::now();
}

std::string Progress::status() const {
  char buf[200];
  const double mean = rows_ ? loss_sum_ / static_cast<double>(rows_) : 0;
  int n = std::snprintf(buf, sizeof buf, "loss %.4f  mean %.4f (steps %lld-%lld)", last_loss_,
                        mean, static_cast<long long>(first_batch_ + 1),
                        static_cast<long long>(last_k_ + 1));
  if (rows_)
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  acc %.1f%%",
                       100.0 * static_cast<double>(correct_) / static_cast<double>(rows_));
  // The epoch's average so far: steadier than one step's rate.
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  %.0f samples/s",
                     elapsed > 0 ? static_cast<double>(rows_) / elapsed : 0.0);
  if (live_) {
    const double done = static_cast<double>(last_k_ + 1 - first_batch_);
    const double eta = done > 0 ? elapsed / done * static_cast<double>(batches_ - last_k_ - 1) : 0;
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  ETA %s",
                  format_duration(eta).c_str());
  }
  return buf;
}

void Progress::print_plain() {
  std::fprintf(out_, "epoch %lld/%lld step %lld/%lld  %s\n", static_cast<long long>(epoch_ + 1),
               static_cast<long long>(epochs_), static_cast<long long>(last_k_ + 1),
               static_cast<long long>(batches_), status().c_str());
  last_printed_ = true;
}

void Progress::step(int64_t k, int64_t rows, double loss, int64_t correct) {
  last_k_ = k;
  last_loss_ = loss;
  last_printed_ = false;
  loss_sum_ += loss * static_cast<double>(rows);
  rows_ += rows;
  correct_ += correct;
  if (live_) {
    constexpr int width = 24;
    const int filled = static_cast<int>(width * (k + 1) / std::max<int64_t>(batches_, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(out_, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  %s",
                 static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_), bar.c_str(),
                 static_cast<long long>(k + 1), static_cast<long long>(batches_),
                 status().c_str());
    bar_shown_ = true;
  } else if (first_of_run_ || (k + 1) % print_every_ == 0 || k + 1 == batches_) {
    print_plain();
  }
  first_of_run_ = false;
  std::fflush(out_);
}

void Progress::end_epoch() {
  if (live_ && bar_shown_) std::fprintf(out_, "\n");
  if (!live_ && !last_printed_ && last_k_ >= 0) print_plain();  // stopped between lines
  bar_shown_ = false;
  std::fflush(out_);
}

void Progress::line(const std::string& text) {
  if (live_ && bar_shown_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", text.c_str());
  bar_shown_ = false;
  std::fflush(out_);
}

}  // namespace brigade::train

#include "tools/train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace brigade::train {

namespace {

// What a line shows; format_progress_line tries these from the fullest down.
struct LineShape {
  int bar_cells;  // 0: no bar ("step k/n" instead when fields.bar is false)
  bool mean_range, mean, rate, accuracy;
};

// Narrower than 8 cells, a bar no longer shows progress at a glance.
constexpr int kFullBarCells = 24, kNarrowestBarCells = 8;

std::string render(const ProgressFields& f, const LineShape& shape) {
  char buf[256];
  std::string line;
  const auto add = [&](const char* format, auto... values) {
    std::snprintf(buf, sizeof buf, format, values...);
    line += buf;
  };
  add("epoch %lld/%lld ", static_cast<long long>(f.epoch), static_cast<long long>(f.epochs));
  if (!f.bar) {
    add("step %lld/%lld", static_cast<long long>(f.step), static_cast<long long>(f.steps));
  } else {
    if (shape.bar_cells > 0) {
      const auto filled = static_cast<size_t>(shape.bar_cells * f.step / std::max<int64_t>(f.steps, 1));
      std::string bar(std::min(filled, static_cast<size_t>(shape.bar_cells)), '#');
      bar.resize(static_cast<size_t>(shape.bar_cells), '.');
      line += "[" + bar + "] ";
    }
    add("%lld/%lld", static_cast<long long>(f.step), static_cast<long long>(f.steps));
  }
  add("  loss %.4f", f.loss);
  if (shape.mean) add("  mean %.4f", f.mean);
  if (shape.mean && shape.mean_range)
    add(" (steps %lld-%lld)", static_cast<long long>(f.first_step), static_cast<long long>(f.step));
  if (shape.accuracy && f.accuracy_percent) add("  acc %.1f%%", *f.accuracy_percent);
  if (shape.rate) add("  %.0f samples/s", f.samples_per_s);
  if (f.eta_s) line += "  ETA " + Progress::format_duration(*f.eta_s);
  return line;
}

}  // namespace

std::string format_progress_line(const ProgressFields& f, int width) {
  const int bar = f.bar ? kFullBarCells : 0;
  const LineShape full{bar, true, true, true, true};
  if (width <= 0) return render(f, full);
  // From the fullest line down, each giving up one more thing; the first that fits is the line.
  const int narrow = f.bar ? kNarrowestBarCells : 0;
  const LineShape shapes[] = {
      full,
      {bar, false, true, true, true},        // without the mean's step range
      {narrow, false, true, true, true},     // the bar narrowed (widened again to fit below)
      {narrow, false, false, true, true},    // without the mean
      {narrow, false, false, false, true},   // without samples/s
      {0, false, false, false, true},        // without the bar
      {0, false, false, false, false},       // without the accuracy
  };
  for (LineShape shape : shapes) {
    std::string line = render(f, shape);
    const int over = static_cast<int>(line.size()) - width;
    if (over <= 0) {
      // A narrowed bar takes back what the width leaves, up to its full size.
      if (shape.bar_cells == kNarrowestBarCells) {
        shape.bar_cells = std::min(kFullBarCells, kNarrowestBarCells - over);
        line = render(f, shape);
      }
      return line;
    }
  }
  return render(f, shapes[std::size(shapes) - 1]).substr(0, static_cast<size_t>(width));
}

int terminal_width() {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    winsize size{};
    // A pseudo-terminal nobody sized (script(1) without a terminal of its own) says 0 columns.
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS")) {
    const int n = std::atoi(columns);
    if (n > 0) return n;
  }
  return 80;
}

bool live_terminal(bool distributed) {
  const char* term = std::getenv("TERM");
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
                            std::getenv("PMIX_RANK");
  return isatty(STDOUT_FILENO) && !distributed && !under_mpirun &&
         !(term && std::strcmp(term, "dumb") == 0);
}

Progress::Progress(std::FILE* out, bool live, int64_t print_every, int width)
    : out_(out), live_(live), print_every_(print_every), width_(width) {}

std::string Progress::format_duration(double seconds) {
  const long s = seconds > 0 ? static_cast<long>(seconds + 0.5) : 0;
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

void Progress::start_epoch(int64_t epoch, int64_t epochs, int64_t batches, int64_t first_batch,
                           int64_t stop_batch) {
  epoch_ = epoch, epochs_ = epochs, batches_ = batches, first_batch_ = first_batch;
  stop_batch_ = stop_batch;
  last_k_ = -1, last_printed_ = true;
  loss_sum_ = 0, rows_ = 0, correct_ = 0;
  start_ = std::chrono::steady_clock::now();
}

ProgressFields Progress::fields() const {
  ProgressFields f;
  f.epoch = epoch_ + 1, f.epochs = epochs_;
  f.step = last_k_ + 1, f.steps = batches_;
  f.loss = last_loss_;
  f.mean = rows_ ? loss_sum_ / static_cast<double>(rows_) : 0;
  f.first_step = first_batch_ + 1;
  if (rows_) f.accuracy_percent = 100.0 * static_cast<double>(correct_) / static_cast<double>(rows_);
  // The epoch's average so far: steadier than one step's rate.
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  f.samples_per_s = elapsed > 0 ? static_cast<double>(rows_) / elapsed : 0.0;
  f.bar = live_;
  if (live_) {
    const double done = static_cast<double>(last_k_ + 1 - first_batch_);
    const double left = static_cast<double>(std::max<int64_t>(0, stop_batch_ - last_k_ - 1));
    f.eta_s = done > 0 ? elapsed / done * left : 0;
  }
  return f;
}

void Progress::print_plain() {
  std::fprintf(out_, "%s\n", format_progress_line(fields(), width_).c_str());
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
    // One column short of the width: a line that reaches the last column leaves the cursor
    // waiting to wrap, and some terminals wrap at once, which the next \r cannot undo.
    const int columns = width_ > 1 ? width_ - 1 : width_;
    std::fprintf(out_, "\r\033[K%s", format_progress_line(fields(), columns).c_str());
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

// The progress line fitted to the terminal (tools/train/progress.h): format_progress_line as a
// pure function of the width — every field when there is room, the least useful given up
// first when there is not, never a column too many — and the width read from $COLUMNS when no
// terminal says it. log_test.cpp runs the program on an 80-column pseudo-terminal.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tools/train/progress.h"

using brigade::train::format_progress_line;
using brigade::train::ProgressFields;

namespace {

// Epoch 2 of 5, step 212 of 469: the example of progress.h, with numbers as wide as they get
// in a real run.
ProgressFields example(bool bar) {
  ProgressFields f;
  f.epoch = 2, f.epochs = 5, f.step = 212, f.steps = 469;
  f.loss = 0.4123, f.mean = 0.4501, f.first_step = 1;
  f.accuracy_percent = 85.1;
  f.samples_per_s = 1510;
  f.bar = bar;
  if (bar) f.eta_s = 21;
  return f;
}

bool has(const std::string& line, const std::string& what) {
  return line.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("progress: with room, every field, as the line always was") {
  CHECK(format_progress_line(example(false), 0) ==
        "epoch 2/5 step 212/469  loss 0.4123  mean 0.4501 (steps 1-212)  acc 85.1%  1510 samples/s");
  const std::string live = format_progress_line(example(true), 200);
  CHECK(live ==
        "epoch 2/5 [##########..............] 212/469  loss 0.4123  mean 0.4501 (steps 1-212)  "
        "acc 85.1%  1510 samples/s  ETA 0:21");
  CHECK(format_progress_line(example(true), static_cast<int>(live.size())) == live);
}

TEST_CASE("progress: the line fits every width, giving up the least useful fields first") {
  for (bool bar : {false, true}) {
    CAPTURE(bar);
    size_t previous = std::string::npos;
    for (int width = 140; width >= 1; --width) {
      CAPTURE(width);
      const std::string line = format_progress_line(example(bar), width);
      CHECK(line.size() <= static_cast<size_t>(width));
      CHECK(line.size() <= previous);  // a narrower terminal never gets a longer line
      previous = line.size();
      // What goes, goes in order: the mean's range before the mean, the mean before the
      // rate, the rate before the accuracy; the loss stays while anything else does.
      if (has(line, "mean")) CHECK(has(line, "samples/s"));
      if (has(line, "samples/s")) CHECK(has(line, "acc"));
      if (has(line, "acc")) CHECK(has(line, "loss 0.4123"));
      if (bar && has(line, "acc")) CHECK(has(line, "ETA 0:21"));
    }
  }
  // An 80-column terminal, where the full line (119 columns) wrapped: the loss, accuracy,
  // rate and ETA stay, and a bar uses the room left over.
  const std::string line = format_progress_line(example(true), 79);
  CHECK(line == "epoch 2/5 [####.....] 212/469  loss 0.4123  acc 85.1%  1510 samples/s  ETA 0:21");
  // Plain lines keep the mean before a bar's room matters.
  CHECK(format_progress_line(example(false), 80) ==
        "epoch 2/5 step 212/469  loss 0.4123  mean 0.4501  acc 85.1%  1510 samples/s");
  CHECK(format_progress_line(example(true), 40) == "epoch 2/5 212/469  loss 0.4123  ETA 0:21");
}

TEST_CASE("progress: off a terminal, the width is $COLUMNS, else 80") {
  if (isatty(STDOUT_FILENO) || isatty(STDERR_FILENO)) return;  // a terminal says its own
  const char* before = std::getenv("COLUMNS");
  const std::string saved = before ? before : "";
  setenv("COLUMNS", "132", 1);
  CHECK(brigade::train::terminal_width() == 132);
  setenv("COLUMNS", "wide", 1);  // not a number: as if unset
  CHECK(brigade::train::terminal_width() == 80);
  unsetenv("COLUMNS");
  CHECK(brigade::train::terminal_width() == 80);
  if (before) setenv("COLUMNS", saved.c_str(), 1);
}

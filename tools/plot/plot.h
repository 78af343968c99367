// A picture of training: loss and accuracy against steps, from --metrics JSON lines
// (tools/train/metrics.h), one or several runs overlaid, as one self-contained SVG.
//
//   ┌ loss ─────────────────────────────┐   per run, one colour: the step losses faint, their
//   │ ╲__                               │   moving mean solid, the test loss of each
//   │    ╲___●_____●______●             │   evaluation a dot on a dashed line
//   ├ accuracy ─────────────────────────┤
//   │      ___●‾‾‾‾‾●‾‾‾‾‾‾●            │   the same for accuracy (training accuracy of each
//   │   __/                             │   step where the runner reports it)
//   └──────────────────────────── step ─┘
//
// Used by brigade-plot (old runs, several at once) and by brigade-train --plot (the run as it
// ends). Nothing here knows about the trainer: a Series is plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace brigade::plot {

struct StepPoint {
  int64_t step = 0;                 // 1-based, the steps done so far
  double loss = 0;
  std::optional<double> accuracy;   // in [0, 1]; absent when the runner does not report it
};

struct EvalPoint {
  int64_t step = 0;
  double loss = 0, accuracy = 0;    // on the test set; accuracy in [0, 1]
};

// One run: its name in the legend, its steps and evaluations in step order.
struct Series {
  std::string name;
  std::vector<StepPoint> steps;
  std::vector<EvalPoint> evals;
};

// A metrics file that cannot be read; what() says file:line and what is wrong.
class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads a --metrics file: "step" and "eval" lines (other kinds are skipped); named after the
// file's stem. A run resumed into the same file (--resume appends) repeats no step; where
// a step appears twice, the later line wins. Throws MetricsError.
Series read_metrics(const std::string& path);

// The moving mean of `values` over `window` points ending at each point (fewer at the start).
std::vector<double> moving_mean(const std::vector<double>& values, size_t window);

// 1, 2, 5 x 10^k ticks covering [lo, hi], both finite: about `count` of them.
std::vector<double> nice_ticks(double lo, double hi, int count);

// The SVG text. Throws std::invalid_argument when no run has a step.
std::string render_svg(const std::vector<Series>& runs, const std::string& title);

}  // namespace brigade::plot

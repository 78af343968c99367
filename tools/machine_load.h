// The machine's load average (/proc/loadavg), which every program that times something states:
// brigade-bench-pipeline prints it beside its figures, and brigade-train warns at its start
// when other work already keeps the cores busy, since its step times, samples/s, measured
// bubble and a `--balance time` cut are then the machine's share left over, not its speed.
// The 1-minute figure is read before the program's timed work begins, so it counts the others.
#pragma once

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

namespace brigade::tools {

struct LoadAverage {
  double one = 0, five = 0, fifteen = 0;  // runnable processes, averaged over 1, 5, 15 minutes
};

// The three averages of a file in /proc/loadavg's form, or nothing where it cannot be read
// (a system without /proc).
inline std::optional<LoadAverage> read_load_average(const std::string& path = "/proc/loadavg") {
  std::ifstream in(path);
  LoadAverage load;
  if (!(in >> load.one >> load.five >> load.fifteen)) return std::nullopt;
  return load;
}

// "0.20 0.15 0.10", or "unknown".
inline std::string describe_load(const std::optional<LoadAverage>& load) {
  if (!load) return "unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %.2f %.2f", load->one, load->five, load->fifteen);
  return text;
}

// Other work keeps at least half of the cores busy: a timing taken now measures what it leaves.
inline bool load_makes_timings_unreliable(const LoadAverage& load, int cores) {
  return load.one >= 0.5 * cores;
}

// The warning a program that times its work prints at its start, or "" on a quiet machine.
inline std::string busy_machine_warning(const std::optional<LoadAverage>& load, int cores) {
  if (!load || !load_makes_timings_unreliable(*load, cores)) return "";
  return "warning: load average " + describe_load(load) + " on " + std::to_string(cores) +
         (cores == 1 ? " core" : " cores") +
         ": other work keeps this machine busy, so this run's timings (step times, samples/s, "
         "the bubble it measures, a --balance time cut) are what that work leaves, not this "
         "machine's speed";
}

}  // namespace brigade::tools

// Timing for the benchmarks: warm-up runs, then several repetitions, and the median.
//
// These machines are shared and noisy: the median of a few repetitions is steadier than the
// mean (one preempted repetition does not move it) and than the minimum (which rewards luck).
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace brigade::bench {

struct Timing {
  double median_s = 0;  // seconds per call, median over the repetitions
  double min_s = 0;
  double max_s = 0;
  int repetitions = 0;
};

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds this process has run, all threads together: on a machine shared with other work
// it counts what the process ran, not what it waited for a core.
inline double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds the calling thread has run: for work on one thread, what it cost, whatever else
// the machine runs (its time waiting for a core is not counted).
inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline Timing summarize(std::vector<double> seconds) {
  Timing t;
  if (seconds.empty()) return t;
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  t.median_s = n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  t.min_s = seconds.front();
  t.max_s = seconds.back();
  t.repetitions = static_cast<int>(n);
  return t;
}

// Calls fn() `warmup` times untimed, then `repetitions` times, each repetition `calls` calls
// of fn (so that a call far shorter than the clock's resolution is still measured); returns
// seconds per call. fn must finish its work before returning (synchronise a GPU stream).
template <class Fn>
Timing time_calls(Fn&& fn, int warmup, int repetitions, int calls = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> per_call;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = now_s();
    for (int c = 0; c < calls; ++c) fn();
    per_call.push_back((now_s() - t0) / calls);
  }
  return summarize(std::move(per_call));
}

// How many calls of a function taking about `probe_s` seconds fill `target_s` (at least 1).
inline int calls_for(double probe_s, double target_s) {
  if (probe_s <= 0) return 1000;
  return std::max(1, static_cast<int>(target_s / probe_s));
}

}  // namespace brigade::bench

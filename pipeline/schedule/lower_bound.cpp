#include "pipeline/schedule/lower_bound.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>
#include <stdexcept>

#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

namespace {

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The schedule's actions by (stage, micro-batch), with their costs and the transfer between
// two stages (comm when they are on different devices).
class Work {
 public:
  Work(const Schedule& s, const CostModel& costs)
      : s_(s), costs_(costs), split_(size_t(s.stages()) * s.microbatches, false) {
    for (const auto& list : s.lists)
      for (const Action& a : list)
        if (a.op == Op::B) split_[index(a.stage, a.microbatch)] = true;
  }
  int stages() const { return s_.stages(); }
  int microbatches() const { return s_.microbatches; }
  bool split(int st, int mb) const { return split_[index(st, mb)]; }
  Action forward(int st, int mb) const { return {st, Op::F, mb}; }
  // The action that makes the input gradient: B where the backward is split, BW where fused.
  Action backward(int st, int mb) const { return {st, split(st, mb) ? Op::B : Op::BW, mb}; }
  // The action that makes the weight gradient, where the pair's memory is freed.
  Action weight(int st, int mb) const { return {st, split(st, mb) ? Op::W : Op::BW, mb}; }
  double cost(const Action& a) const { return action_cost(s_, costs_, a); }
  double hop(int from, int to) const {
    return s_.device_of(from) == s_.device_of(to) ? 0 : costs_.comm;
  }

 private:
  size_t index(int st, int mb) const { return size_t(st) * s_.microbatches + size_t(mb); }
  const Schedule& s_;
  const CostModel& costs_;
  std::vector<bool> split_;
};

// Heads (the longest chain of dependencies into an action's start) and tails (the longest
// chain out of its end, to the end of the step), with no device ever busy.
struct Chains {
  std::map<Action, double> head, tail;
};

Chains chains(const Work& w) {
  Chains c;
  const int S = w.stages();
  for (int mb = 0; mb < w.microbatches(); ++mb) {
    for (int st = 0; st < S; ++st)
      c.head[w.forward(st, mb)] =
          st == 0 ? 0
                  : c.head[w.forward(st - 1, mb)] + w.cost(w.forward(st - 1, mb)) + w.hop(st - 1, st);
    for (int st = S - 1; st >= 0; --st) {
      double h = c.head[w.forward(st, mb)] + w.cost(w.forward(st, mb));
      if (st + 1 < S) {
        const Action next = w.backward(st + 1, mb);
        h = std::max(h, c.head[next] + w.cost(next) + w.hop(st + 1, st));
      }
      c.head[w.backward(st, mb)] = h;
      if (w.split(st, mb)) c.head[w.weight(st, mb)] = h + w.cost(w.backward(st, mb));
    }
    for (int st = 0; st < S; ++st) {
      double t = w.split(st, mb) ? w.cost(w.weight(st, mb)) : 0;
      if (st > 0) {
        const Action prev = w.backward(st - 1, mb);
        t = std::max(t, w.hop(st, st - 1) + w.cost(prev) + c.tail[prev]);
      }
      c.tail[w.backward(st, mb)] = t;
      if (w.split(st, mb)) c.tail[w.weight(st, mb)] = 0;
    }
    for (int st = S - 1; st >= 0; --st) {
      const Action b = w.backward(st, mb);
      double t = w.cost(b) + c.tail[b];
      if (st + 1 < S) {
        const Action next = w.forward(st + 1, mb);
        t = std::max(t, w.hop(st, st + 1) + w.cost(next) + c.tail[next]);
      }
      c.tail[w.forward(st, mb)] = t;
    }
  }
  return c;
}

// One device alone with heads and tails, interruptions allowed: Jackson's rule (run the ready
// action with the longest tail; switch when a longer tail arrives) is optimal for that
// relaxation, and its max(end + tail) is a bound for the real, uninterrupted problem.
double device_bound(const std::vector<Action>& list, const Work& w, const Chains& c) {
  struct Job {
    double release, left, tail;
  };
  std::vector<Job> jobs;
  for (const Action& a : list) jobs.push_back({c.head.at(a), w.cost(a), c.tail.at(a)});
  std::sort(jobs.begin(), jobs.end(), [](const Job& x, const Job& y) { return x.release < y.release; });
  auto by_tail = [](const Job* x, const Job* y) { return x->tail < y->tail; };
  std::priority_queue<Job*, std::vector<Job*>, decltype(by_tail)> ready(by_tail);
  const double never = std::numeric_limits<double>::infinity();
  double t = 0, best = 0;
  size_t next = 0;
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty()) t = std::max(t, jobs[next].release);
    while (next < jobs.size() && jobs[next].release <= t) ready.push(&jobs[next++]);
    Job* j = ready.top();
    const double until = next < jobs.size() ? jobs[next].release : never;
    if (j->left <= until - t) {  // it finishes before the next action becomes ready
      t += j->left;
      best = std::max(best, t + j->tail);
      ready.pop();
    } else {  // run it until then, and choose again
      j->left -= until - t;
      t = until;
    }
  }
  return best;
}

// The least time from the start of (st, mb)'s forward to the end of its weight gradient: the
// forward down to the last stage, the backward back up to st, with the transfers.
double round_trip(const Work& w, int st, int mb) {
  const int S = w.stages();
  std::vector<double> forward_end(size_t(S), 0);
  double t = 0;
  for (int s2 = st; s2 < S; ++s2) {
    t += (s2 > st ? w.hop(s2 - 1, s2) : 0) + w.cost(w.forward(s2, mb));
    forward_end[size_t(s2)] = t;
  }
  double backward_end = 0;
  for (int s2 = S - 1; s2 >= st; --s2) {
    const double start = s2 == S - 1 ? forward_end[size_t(s2)]
                                     : std::max(forward_end[size_t(s2)],
                                                backward_end + w.hop(s2 + 1, s2));
    backward_end = start + w.cost(w.backward(s2, mb));
  }
  return backward_end + (w.split(st, mb) ? w.cost(w.weight(st, mb)) : 0);
}

// Stage st's forwards in the order they start, at most `held` of its pairs alive at once: the
// (j + held)-th starts after the j-th pair ended, at least a round trip after the j-th began.
double memory_bound(const Work& w, const Chains& c, int st, int held) {
  const int m = w.microbatches();
  double first = std::numeric_limits<double>::infinity(), trip = first, f = first, tail = first;
  for (int mb = 0; mb < m; ++mb) {
    first = std::min(first, c.head.at(w.forward(st, mb)));
    trip = std::min(trip, round_trip(w, st, mb));
    f = std::min(f, w.cost(w.forward(st, mb)));
    tail = std::min(tail, c.tail.at(w.weight(st, mb)));
  }
  std::vector<double> start(static_cast<size_t>(m));  // the j-th forward's earliest start
  for (int j = 0; j < m; ++j) {
    start[size_t(j)] = j == 0 ? first : start[size_t(j - 1)] + f;
    if (j >= held) start[size_t(j)] = std::max(start[size_t(j)], start[size_t(j - held)] + trip);
  }
  return start[size_t(m - 1)] + trip + tail;
}

}  // namespace

MakespanBound makespan_lower_bound(const Schedule& s, const CostModel& costs,
                                   const std::vector<int>& memory) {
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != s.stages())
    throw std::invalid_argument("lower bound of '" + s.name + "': the cost model has " +
                                std::to_string(costs.stages.size()) + " stage costs for " +
                                std::to_string(s.stages()) + " stages");
  std::vector<int> held = memory.empty() ? peak_live(lower(s)) : memory;
  if (static_cast<int>(held.size()) != s.devices)
    throw std::invalid_argument("lower bound of '" + s.name + "': " +
                                std::to_string(held.size()) + " memory bounds for " +
                                std::to_string(s.devices) + " devices");
  for (int h : held)
    if (h < 1)
      throw std::invalid_argument("lower bound of '" + s.name + "': a device must hold at least "
                                  "1 pair, got " + std::to_string(h));

  const Work w(s, costs);
  const Chains c = chains(w);
  MakespanBound best;
  for (int mb = 0; mb < s.microbatches; ++mb) {
    const Action first = w.forward(0, mb);
    const double path = w.cost(first) + c.tail.at(first);
    if (path > best.makespan)
      best = {path, "path: micro-batch " + std::to_string(mb) + " down every stage and back, " +
                        num(path)};
  }
  for (int d = 0; d < s.devices; ++d) {
    const double b = device_bound(s.lists[size_t(d)], w, c);
    if (b > best.makespan)
      best = {b, "device " + std::to_string(d) + ": its own work between the first input it "
                 "waits for and the last chain after it, " + num(b)};
  }
  for (int st = 0; st < s.stages(); ++st) {
    const int h = held[size_t(s.device_of(st))];
    if (h >= s.microbatches) continue;  // every micro-batch fits: no wait for memory
    const double b = memory_bound(w, c, st, h);
    if (b > best.makespan)
      best = {b, "memory: device " + std::to_string(s.device_of(st)) + " holds at most " +
                     std::to_string(h) + " pairs, so stage " + std::to_string(st) +
                     "'s forwards wait for its round trips, " + num(b)};
  }
  return best;
}

}  // namespace brigade::pipeline

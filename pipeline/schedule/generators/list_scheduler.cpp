#include "pipeline/schedule/generators/list_scheduler.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/squeeze.h"
#include "pipeline/schedule/simulator.h"

namespace brigade::pipeline {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class ListScheduler {
 public:
  ListScheduler(const ListProblem& problem, ListPolicy policy)
      : s_(detail::empty_schedule(problem.name, problem.devices, problem.microbatches,
                                  problem.chunks)),
        problem_(problem), policy_(policy), dev_(static_cast<size_t>(problem.devices)),
        stage_(static_cast<size_t>(s_.stages())) {
    s_.placement = problem.placement;
    for (Stage& st : stage_) {
      st.f_end.assign(static_cast<size_t>(s_.microbatches), kNever);
      st.b_end = st.f_end;
    }
    for (int d = 0; d < s_.devices; ++d) dev(d).stages = s_.stages_on(d);
  }

  Schedule run() {
    double now = 0;
    while (weights_done_ < s_.stages() * s_.microbatches) {
      for (bool placed = true; placed;) {  // zero-cost actions may enable more at `now`
        placed = false;
        for (int d = 0; d < s_.devices; ++d)
          if (dev(d).free_at <= now)
            if (const std::optional<Action> a = choose(d, now)) place(d, *a, now), placed = true;
      }
      now = next_event(now);
    }
    return s_;
  }

 private:
  struct Device {
    std::vector<int> stages;  // ascending; stages.front() admits micro-batches
    std::deque<std::pair<int, int>> pending_w;  // (stage, micro-batch), oldest first
    int held = 0;  // chunk-micro-batches held: from the start of their F to the end of their W
    // [admitted micro-batch, oldest first]: its chunks on this device whose F has not started;
    // dropped from the front once 0. Later chunks run in micro-batch order, so the front is the
    // micro-batch the next later-chunk F belongs to.
    std::deque<int> owed;
    int first_owing = 0;  // the micro-batch owed.front() counts
    double free_at = 0;
  };
  struct Stage {
    int next_f = 0, next_b = 0;
    std::vector<double> f_end, b_end;  // [micro-batch]; kNever: not placed yet
  };

  Device& dev(int d) { return dev_[static_cast<size_t>(d)]; }
  Stage& stage(int s) { return stage_[static_cast<size_t>(s)]; }
  double cost(const Action& a) const { return action_cost(s_, problem_.costs, a); }
  // The input of stage st's next F (or B) arrives at this time; kNever while unknown.
  double arrival(int st, int from, double end) {
    if (end == kNever) return kNever;
    return s_.device_of(from) == s_.device_of(st) ? end : end + problem_.costs.comm;
  }
  double f_ready(int st) {
    const int mb = stage(st).next_f;
    if (mb >= s_.microbatches) return kNever;
    return st == 0 ? 0 : arrival(st, st - 1, stage(st - 1).f_end[static_cast<size_t>(mb)]);
  }
  double b_ready(int st) {
    const int mb = stage(st).next_b;
    if (mb >= stage(st).next_f) return kNever;
    if (st + 1 == s_.stages()) return stage(st).f_end[static_cast<size_t>(mb)];
    return arrival(st, st + 1, stage(st + 1).b_end[static_cast<size_t>(mb)]);
  }
  // Any F needs room for its own chunk. A device's first stage admits a new micro-batch only
  // with room besides for the later chunks of the micro-batches the policy reserves for (the
  // new one's included): all of them by default, so that every admitted micro-batch can finish.
  bool admits(int d, int st) {
    const Device& v = dev(d);
    if (st != v.stages.front()) return v.held + 1 <= problem_.budget_of(d);
    // The owed chunks of the oldest `reserved` micro-batches, the new one counted last.
    const size_t admitted = v.owed.size() + 1;
    const size_t reserved = policy_.reserved == 0
                                ? admitted
                                : std::min(admitted, static_cast<size_t>(policy_.reserved));
    int room = v.held + 1;
    for (size_t i = 0; i < std::min(reserved, v.owed.size()); ++i) room += v.owed[i];
    if (reserved == admitted) room += s_.chunks - 1;
    return room <= problem_.budget_of(d);
  }
  bool full(int d) { return !admits(d, dev(d).stages.front()); }

  std::optional<Action> choose(int d, double now) {
    Device& v = dev(d);
    std::optional<int> b_stage, f_stage;
    for (int st : v.stages) {  // ascending: the last ready one is the deepest
      if (b_ready(st) <= now) b_stage = st;
      const bool f_ok = f_ready(st) <= now && admits(d, st);
      if (f_ok && (!f_stage || policy_.deepest_forward)) f_stage = st;
    }
    if (b_stage && !(f_stage && policy_.forward_first)) return backward(d, *b_stage, now);
    if (f_stage) return Action{*f_stage, Op::F, stage(*f_stage).next_f};
    if (v.pending_w.empty()) return std::nullopt;
    const Action w{v.pending_w.front().first, Op::W, v.pending_w.front().second};
    const bool room_needed = (full(d) && stage(v.stages.front()).next_f < s_.microbatches) ||
                             v.held >= problem_.budget_of(d);
    if (room_needed || !policy_.w_fits) return w;
    double next_input = kNever;
    for (int st : v.stages) {
      next_input = std::min(next_input, b_ready(st));
      if (admits(d, st)) next_input = std::min(next_input, f_ready(st));
    }
    if (now + cost(w) <= next_input) return w;
    return std::nullopt;
  }

  Action backward(int d, int st, double now) {
    const Action bw{st, Op::BW, stage(st).next_b};
    bool fuse = false;
    if (dev(d).pending_w.empty()) switch (policy_.fuse) {
        case Fuse::never: break;
        case Fuse::always: fuse = true; break;
        case Fuse::first_stage: fuse = st == 0; break;
        case Fuse::upstream_busy: {
          // Splitting helps only if the device upstream could use the input gradient sooner.
          const int up = st == 0 ? d : s_.device_of(st - 1);
          fuse = st == 0 ||
                 (up != d && dev(up).free_at >= now + cost(bw) + problem_.costs.comm);
          break;
        }
      }
    return fuse ? bw : Action{st, Op::B, stage(st).next_b};
  }

  void place(int d, const Action& a, double now) {
    Device& v = dev(d);
    Stage& st = stage(a.stage);
    const double end = now + cost(a);
    const auto mb = static_cast<size_t>(a.microbatch);
    switch (a.op) {
      case Op::F:
        ++v.held;
        if (a.stage == v.stages.front()) {
          if (v.owed.empty()) v.first_owing = a.microbatch;
          v.owed.push_back(s_.chunks - 1);
        } else {
          --v.owed.at(static_cast<size_t>(a.microbatch - v.first_owing));
        }
        while (!v.owed.empty() && v.owed.front() == 0) v.owed.pop_front(), ++v.first_owing;
        st.f_end[mb] = end;
        ++st.next_f;
        break;
      case Op::B:
        st.b_end[mb] = end;
        ++st.next_b;
        v.pending_w.emplace_back(a.stage, a.microbatch);
        break;
      case Op::W:
        v.pending_w.pop_front();
        --v.held;
        ++weights_done_;
        break;
      case Op::BW:
        st.b_end[mb] = end;
        ++st.next_b;
        --v.held;
        ++weights_done_;
        break;
    }
    v.free_at = end;
    s_.lists[static_cast<size_t>(d)].push_back(a);
  }

  // The earliest time after `now` at which a device frees up or an input arrives.
  double next_event(double now) {
    double next = kNever;
    for (const Device& v : dev_)
      if (v.free_at > now) next = std::min(next, v.free_at);
    for (int st = 0; st < s_.stages(); ++st)
      for (double t : {f_ready(st), b_ready(st)})
        if (t > now) next = std::min(next, t);
    if (next == kNever)  // cannot happen: the budget admits a whole micro-batch (see the header)
      throw std::logic_error(std::string(problem_.name) + ": the list scheduler stalled at t=" +
                             std::to_string(now));
    return next;
  }

  Schedule s_;
  const ListProblem& problem_;
  ListPolicy policy_;
  std::vector<Device> dev_;
  std::vector<Stage> stage_;
  int weights_done_ = 0;  // (stage, micro-batch) pairs whose W or BW is placed
};

// Whether no device of the simulated schedule holds more than its budget.
bool within_budgets(const Simulation& sim, const ListProblem& problem) {
  for (size_t d = 0; d < sim.stats.devices.size(); ++d)
    if (sim.stats.devices[d].peak_in_flight > problem.budget_of(static_cast<int>(d))) return false;
  return true;
}

}  // namespace

Schedule list_schedule(const ListProblem& problem, const ListPolicy& policy) {
  detail::empty_schedule(problem.name, problem.devices, problem.microbatches, problem.chunks);
  const int stages = problem.devices * problem.chunks;
  if (!problem.costs.stages.empty() && static_cast<int>(problem.costs.stages.size()) != stages)
    throw std::invalid_argument(std::string(problem.name) + ": the cost model has " +
                                std::to_string(problem.costs.stages.size()) + " stage costs for " +
                                std::to_string(stages) + " stages");
  if (!problem.device_budgets.empty() &&
      static_cast<int>(problem.device_budgets.size()) != problem.devices)
    throw std::invalid_argument(std::string(problem.name) + ": " +
                                std::to_string(problem.device_budgets.size()) +
                                " device budgets for " + std::to_string(problem.devices) +
                                " devices");
  for (int d = 0; d < problem.devices; ++d)
    if (problem.budget_of(d) < problem.chunks)
      throw std::invalid_argument(
          std::string(problem.name) + ": a budget of " + std::to_string(problem.budget_of(d)) +
          " chunk-micro-batches on device " + std::to_string(d) +
          " cannot hold one micro-batch's " + std::to_string(problem.chunks) +
          " chunks; give at least " + std::to_string(problem.chunks));
  return ListScheduler(problem, policy).run();
}

namespace {

// Every policy's run; runs with a partial reservation that stalled are left out.
std::vector<Schedule> policy_runs(const ListProblem& problem) {
  std::vector<Schedule> runs;
  for (bool forward_first : {false, true})
    for (Fuse fuse : {Fuse::never, Fuse::first_stage, Fuse::upstream_busy, Fuse::always})
      for (bool w_fits : {false, true})
        for (bool deepest : {false, true})
          for (int reserved : {0, 1, 2}) {
            // One stage per device: no choice of F, nothing later to reserve for.
            if ((deepest || reserved > 0) && problem.chunks == 1) continue;
            try {
              runs.push_back(
                  list_schedule(problem, {forward_first, fuse, w_fits, deepest, reserved}));
            } catch (const std::logic_error&) {  // a partial reservation that stalled
              if (reserved == 0) throw;
            }
          }
  return runs;
}

// How a candidate ranks: the makespan; between equally short ones, the makespan when every
// backward costs twice as much (B ≈ 2F is the usual ratio: an order planned for equal costs
// should hold up there), then the most any device holds: -1, 0 (a tie on all three) or 1.
// A tie goes to the shorter with a transfer cost besides (shortest_list_schedule), worked out
// only for ties: links are rarely free, and an order whose sends wait less holds up there.
struct Rank {
  double makespan, heavy_makespan;
  int memory;
};
int compare(const Rank& a, const Rank& b) {
  const auto less = [](double x, double y) { return x < y * (1 - 1e-12); };
  if (less(a.makespan, b.makespan)) return -1;
  if (less(b.makespan, a.makespan)) return 1;
  if (less(a.heavy_makespan, b.heavy_makespan)) return -1;
  if (less(b.heavy_makespan, a.heavy_makespan)) return 1;
  return a.memory < b.memory ? -1 : a.memory > b.memory ? 1 : 0;
}

// The tie-breaks' costs: every B twice as long, and then a transfer of a tenth of a device's
// forward besides (a device's share of F: its chunks' F's, their mean over the stages).
CostModel heavy_backward_costs(const ListProblem& problem) {
  CostModel heavy = problem.costs;
  heavy.uniform.b *= 2;
  for (StageCost& c : heavy.stages) c.b *= 2;
  return heavy;
}
double tenth_of_a_forward(const ListProblem& problem) {
  double f = problem.costs.uniform.f;
  if (!problem.costs.stages.empty()) {
    f = 0;
    for (const StageCost& c : problem.costs.stages) f += c.f;
    f /= static_cast<double>(problem.costs.stages.size());
  }
  return 0.1 * problem.chunks * f;
}

}  // namespace

Schedule shortest_list_schedule(const ListProblem& problem, std::vector<Schedule> hand_made) {
  std::vector<Schedule> candidates = policy_runs(problem);
  const size_t policies = candidates.size();
  for (Schedule& s : hand_made) candidates.push_back(std::move(s));
  std::vector<Simulation> sims;
  for (const Schedule& s : candidates) sims.push_back(simulate(s, problem.costs));

  // The few shortest orders again, with their idle units filled (squeeze.h) each way squeeze
  // moves, within the memory each order holds itself (the paper's squeeze of its building
  // block: faster for no more memory). Only a few: squeezing is the slow part, and a long
  // order's idle units rarely make the shortest schedule.
  constexpr size_t kSqueezed = 6;
  std::vector<size_t> shortest(candidates.size());
  for (size_t i = 0; i < shortest.size(); ++i) shortest[i] = i;
  std::stable_sort(shortest.begin(), shortest.end(), [&](size_t a, size_t b) {
    return sims[a].stats.makespan < sims[b].stats.makespan;
  });
  shortest.resize(std::min(shortest.size(), kSqueezed));
  for (size_t i : shortest) {
    std::vector<int> held;
    for (int d = 0; d < problem.devices; ++d)
      held.push_back(std::min(problem.budget_of(d),
                              sims[i].stats.devices[static_cast<size_t>(d)].peak_in_flight));
    for (Squeeze order : {Squeeze::in_time, Squeeze::backwards_first, Squeeze::backwards_only}) {
      candidates.push_back(squeeze(candidates[i], held, order));
      sims.push_back(simulate(candidates.back(), problem.costs));
    }
  }

  // The first best ranked (policies before hand-made ones, orders before their squeezes); all
  // but the policies' runs only within the budget.
  const CostModel heavy_backward = heavy_backward_costs(problem);
  CostModel heavy_with_comm = heavy_backward;
  heavy_with_comm.comm += tenth_of_a_forward(problem);
  std::optional<size_t> best;
  Rank best_rank{};
  double best_with_comm = -1;  // worked out at the first tie (-1: not yet)
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i >= policies && !within_budgets(sims[i], problem)) continue;
    Rank rank{sims[i].stats.makespan, 0, 0};
    if (best && rank.makespan > best_rank.makespan * (1 + 1e-12)) continue;  // cannot win
    rank.heavy_makespan = simulate(candidates[i], heavy_backward).stats.makespan;
    for (const DeviceStats& d : sims[i].stats.devices)
      rank.memory = std::max(rank.memory, d.peak_in_flight);
    const int order = best ? compare(rank, best_rank) : -1;
    if (order > 0) continue;
    if (order == 0) {  // a tie: the shorter with a transfer cost, else the first
      if (best_with_comm < 0)
        best_with_comm = simulate(candidates[*best], heavy_with_comm).stats.makespan;
      const double with_comm = simulate(candidates[i], heavy_with_comm).stats.makespan;
      if (with_comm >= best_with_comm * (1 - 1e-12)) continue;
      best_with_comm = with_comm;
    } else {
      best_with_comm = -1;
    }
    best = i, best_rank = rank;
  }
  Schedule s = std::move(candidates[*best]);  // the policies' runs are always candidates
  s.name = problem.name;
  return s;
}

}  // namespace brigade::pipeline

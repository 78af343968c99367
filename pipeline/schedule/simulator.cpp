#include "pipeline/schedule/simulator.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "pipeline/schedule/need_table.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

namespace {

double cost_of(const CostModel& costs, const Action& a, int batch_units) {
  if (auto it = costs.measured.find(a); it != costs.measured.end()) return it->second;
  const StageCost& c = costs.stage(a.stage);
  double one = 0;
  switch (a.op) {
    case Op::F: one = c.f; break;
    case Op::B: one = c.b; break;
    case Op::W: one = c.w; break;
    case Op::BW: one = c.fused(); break;
  }
  return one * batch_units;
}

// What both simulations check first: the costs fit, every stage and micro-batch is in range.
template <class S>
void check_fit(const S& s, const CostModel& costs) {
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != s.stages())
    throw std::invalid_argument("simulate '" + s.name + "': the cost model has " +
                                std::to_string(costs.stages.size()) + " stage costs for " +
                                std::to_string(s.stages()) + " stages");
  for (int d = 0; d < s.devices; ++d)
    for (const auto& a : s.lists[d])
      if (a.stage < 0 || a.stage >= s.stages() || a.microbatch < 0 ||
          a.microbatch >= s.microbatches)
        throw std::invalid_argument("simulate '" + s.name + "': action " + to_string(a) +
                                    " is out of range; validate() the schedule first");
}

template <class S>
TimelineStats stats_of(const S& s, const CostModel& costs, const Timeline& t) {
  std::vector<double> bytes(s.stages());
  for (int st = 0; st < s.stages(); ++st)
    bytes[st] = costs.stage(st).activation_bytes * s.batch_units;
  return measure(t, bytes);
}

}  // namespace

double action_cost(const Schedule& s, const CostModel& costs, const Action& a) {
  return cost_of(costs, a, s.batch_units);
}

Simulation simulate(const Schedule& s, const CostModel& costs) {
  check_fit(s, costs);

  Simulation sim;
  Timeline& t = sim.timeline;
  t.title = s.name;
  t.devices = s.devices;
  t.chunks = s.chunks;

  NeedTable<double> done_at(s.stages(), s.microbatches, -1);  // -1: not finished yet
  std::vector<double> free_at(s.devices, 0);
  std::vector<size_t> next(s.devices, 0);
  size_t remaining = s.total_actions();

  while (remaining > 0) {
    bool progressed = false;
    for (int d = 0; d < s.devices; ++d) {
      while (next[d] < s.lists[d].size()) {
        const Action& a = s.lists[d][next[d]];
        double start = free_at[d];
        bool ready = true;
        for (const Need& n : needs(a, s.stages())) {
          if (done_at[n] < 0) { ready = false; break; }
          const double hop = s.device_of(n.stage) == d ? 0 : costs.comm;
          start = std::max(start, done_at[n] + hop);
        }
        if (!ready) break;
        const double end = start + action_cost(s, costs, a);
        for (Phase ph : completes(a.op)) done_at[{a.stage, ph, a.microbatch}] = end;
        t.events.push_back({d, 0, a, start, end});
        free_at[d] = end;
        ++next[d];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string why;
      for (int d = 0; d < s.devices; ++d) {
        if (next[d] == s.lists[d].size()) continue;
        const Action& a = s.lists[d][next[d]];
        for (const Need& n : needs(a, s.stages()))
          if (done_at[n] < 0) {
            why += (why.empty() ? "" : "; ") + std::string("device ") + std::to_string(d) +
                   " waits at " + to_string(a) + " for " + to_string(n);
            break;
          }
      }
      throw ScheduleError("simulate '" + s.name + "': not progressing: " + why);
    }
  }

  sim.stats = stats_of(s, costs, t);
  return sim;
}

Simulation simulate(const LoweredSchedule& s, const CostModel& costs) {
  check_fit(s, costs);
  for (const auto& list : s.lists)
    for (const Instruction& i : list)
      if (!is_compute(i.kind) && (partner(i).stage < 0 || partner(i).stage >= s.stages()))
        throw std::invalid_argument("simulate '" + s.name + "': " + to_string(i) +
                                    " has no neighbour stage; validate() the schedule first");
  Simulation sim;
  Timeline& t = sim.timeline;
  t.title = s.name;
  t.devices = s.devices;
  t.chunks = s.chunks;
  t.lanes = {"compute", "send", "recv"};

  // Tensors are named as needs are: the activation stage s makes is (s, Forward, m), the
  // input gradient it makes (s, InputGrad, m).
  NeedTable<double> done_at(s.stages(), s.microbatches, -1);  // compute phases
  NeedTable<double> sent_start(s.stages(), s.microbatches, -1), sent_end = sent_start;
  NeedTable<double> arrived(s.stages(), s.microbatches, -1);  // by the receiving stage
  NeedTable<size_t> send_event(s.stages(), s.microbatches, 0);
  std::vector<std::array<double, 3>> lane_free(s.devices, {0, 0, 0});
  std::vector<size_t> next(s.devices, 0);
  size_t remaining = s.total();

  // The start of instruction i on device d, or -1 while something it waits for is unknown.
  auto start_of = [&](int d, const Instruction& i) -> double {
    const int lane = static_cast<int>(lane_of(i.kind));
    const Phase tensor = i.kind == Kind::SendF || i.kind == Kind::RecvF ? Phase::Forward
                                                                        : Phase::InputGrad;
    double start = lane_free[d][lane];
    switch (lane_of(i.kind)) {
      case Lane::Send: {
        const double made = done_at[{i.stage, tensor, i.microbatch}];
        return made < 0 ? -1 : std::max(start, made);
      }
      case Lane::Recv: {
        const double sent = sent_start[{partner(i).stage, tensor, i.microbatch}];
        return sent < 0 ? -1 : std::max(start, sent);
      }
      case Lane::Compute:
        for (const Need& n : needs(compute_action(i), s.stages())) {
          // From this device, or from another through a receive on this one.
          const double ready = s.device_of(n.stage) == d
                                   ? done_at[n]
                                   : arrived[{i.stage, n.phase, i.microbatch}];
          if (ready < 0) return -1;
          start = std::max(start, ready);
        }
        return start;
    }
    return -1;
  };

  while (remaining > 0) {
    bool progressed = false;
    for (int d = 0; d < s.devices; ++d) {
      while (next[d] < s.lists[d].size()) {
        const Instruction& i = s.lists[d][next[d]];
        const double start = start_of(d, i);
        if (start < 0) break;
        const Lane lane = lane_of(i.kind);
        const bool activation = i.kind == Kind::SendF || i.kind == Kind::RecvF;
        const Need tensor{i.stage, activation ? Phase::Forward : Phase::InputGrad, i.microbatch};
        Action shown{i.stage, activation ? Op::F : Op::B, i.microbatch};  // see timeline.h
        double end = start;
        if (lane == Lane::Compute) {
          shown = compute_action(i);
          end = start + cost_of(costs, shown, s.batch_units);
          for (Phase ph : completes(shown.op)) done_at[{i.stage, ph, i.microbatch}] = end;
        } else if (lane == Lane::Send) {
          end = start + costs.comm;
          sent_start[tensor] = start;
          sent_end[tensor] = end;
          send_event[tensor] = t.events.size();
        } else {
          const Need sent{partner(i).stage, tensor.phase, i.microbatch};
          end = std::max(start, sent_end[sent]);
          arrived[tensor] = end;
          t.flows.push_back({send_event[sent], t.events.size()});
        }
        t.events.push_back({d, static_cast<int>(lane), shown, start, end});
        lane_free[d][static_cast<int>(lane)] = end;
        ++next[d];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string why;
      for (int d = 0; d < s.devices; ++d)
        if (next[d] < s.lists[d].size())
          why += (why.empty() ? "device " : "; device ") + std::to_string(d) + " waits at " +
                 to_string(s.lists[d][next[d]]);
      throw ScheduleError("simulate '" + s.name + "': not progressing: " + why +
                          " (validate() names the cycle)");
    }
  }
  sim.stats = stats_of(s, costs, t);
  return sim;
}

}  // namespace brigade::pipeline

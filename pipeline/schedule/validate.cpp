#include "pipeline/schedule/validate.h"

#include <algorithm>
#include <map>

#include "pipeline/schedule/dry_run.h"
#include "pipeline/schedule/happens_before.h"

namespace brigade::pipeline {

namespace {

std::string where(int device, int index) {
  return "device " + std::to_string(device) + " position " + std::to_string(index);
}

// The checks shared by compute-only and lowered lists, over instructions. A compute-only
// schedule is checked as lists without transfers, so positions are the same in both.
struct Checker {
  const LoweredSchedule& l;
  const Schedule* compute;  // compute-only lists: the picture is their dry-run grid

  const Instruction& at(Cell c) const { return l.lists[c.device][c.index]; }

  // The lists with one instruction bracketed: used when the grid cannot be drawn because an
  // action is out of range or on the wrong device.
  std::string lists_with_mark(Cell mark) const {
    std::string out;
    for (int d = 0; d < static_cast<int>(l.lists.size()); ++d) {
      out += 'd';
      out += std::to_string(d);
      out += ':';
      for (int i = 0; i < static_cast<int>(l.lists[d].size()); ++i) {
        const std::string text = to_string(l.lists[d][i]);
        out += (d == mark.device && i == mark.index) ? " [" + text + "]" : " " + text;
      }
      out += "\n";
    }
    return out;
  }

  [[noreturn]] void fail(const std::string& what, std::optional<Cell> mark,
                         bool grid_possible = true) const {
    const Schedule header{l.name,        l.devices,   l.chunks, l.microbatches,
                          l.batch_units, l.placement, {}};
    std::string msg = "schedule '" + l.name + "' is invalid: " + what + "\n" +
                      format_placement(header) + "\n";
    if (!grid_possible) msg += lists_with_mark(*mark);
    else if (compute) msg += format_grid(*compute, dry_run(*compute), mark);
    else msg += format_grid(l, mark);
    throw ScheduleError(msg, mark);
  }

  void shape() const {
    if (l.devices < 1 || l.chunks < 1 || l.microbatches < 1 || l.batch_units < 1)
      throw ScheduleError("schedule '" + l.name + "' is invalid: devices=" +
                          std::to_string(l.devices) + ", chunks=" + std::to_string(l.chunks) +
                          ", microbatches=" + std::to_string(l.microbatches) + ", batch_units=" +
                          std::to_string(l.batch_units) + " (each must be at least 1)");
    if (static_cast<int>(l.lists.size()) != l.devices)
      throw ScheduleError("schedule '" + l.name + "' is invalid: it has " +
                          std::to_string(l.lists.size()) + " lists for " +
                          std::to_string(l.devices) + " devices");
  }

  void ranges_and_placement() const {
    for (int d = 0; d < l.devices; ++d)
      for (int i = 0; i < static_cast<int>(l.lists[d].size()); ++i) {
        const Instruction& a = l.lists[d][i];
        const std::string name = to_string(a) + " at " + where(d, i);
        if (a.stage < 0 || a.stage >= l.stages())
          fail(name + ": stage out of range (there are " + std::to_string(l.stages()) +
                   " stages)", Cell{d, i}, false);
        if (a.microbatch < 0 || a.microbatch >= l.microbatches)
          fail(name + ": micro-batch out of range (m = " + std::to_string(l.microbatches) + ")",
               Cell{d, i}, false);
        if (l.device_of(a.stage) != d)
          fail(name + ": stage " + std::to_string(a.stage) + " lives on device " +
                   std::to_string(l.device_of(a.stage)), Cell{d, i}, false);
      }
  }

  // A transfer must join its stage to a neighbour on another device.
  void transfer_ends() const {
    for (int d = 0; d < l.devices; ++d)
      for (int i = 0; i < static_cast<int>(l.lists[d].size()); ++i) {
        const Instruction& a = l.lists[d][i];
        if (is_compute(a.kind)) continue;
        const int other = partner(a).stage;
        const std::string name = to_string(a) + " at " + where(d, i);
        if (other < 0 || other >= l.stages())
          fail(name + ": stage " + std::to_string(a.stage) + " has no stage " +
                   std::to_string(other) + " to " +
                   (lane_of(a.kind) == Lane::Send ? "send to" : "receive from"),
               Cell{d, i});
        if (l.device_of(other) == d)
          fail(name + ": stages " + std::to_string(a.stage) + " and " + std::to_string(other) +
                   " both live on device " + std::to_string(d) +
                   "; they hand over without a transfer", Cell{d, i});
      }
  }

  // Where each instruction sits; duplicates and B/BW mixtures are reported here, then any
  // compute action that is missing.
  std::map<Instruction, Cell> counts() const {
    std::map<Instruction, Cell> at;
    for (int d = 0; d < l.devices; ++d)
      for (int i = 0; i < static_cast<int>(l.lists[d].size()); ++i) {
        const Instruction& a = l.lists[d][i];
        if (auto it = at.find(a); it != at.end())
          fail(to_string(a) + " appears twice (" + where(it->second.device, it->second.index) +
                   " and " + where(d, i) + ")", Cell{d, i});
        // A (stage, micro-batch) runs either B then W, or BW: never both kinds.
        const bool fused = a.kind == Kind::BW, split = a.kind == Kind::B || a.kind == Kind::W;
        auto has = [&](Kind k) { return at.count({a.stage, k, a.microbatch}) > 0; };
        if ((fused && (has(Kind::B) || has(Kind::W))) || (split && has(Kind::BW)))
          fail(to_string(a) + " at " + where(d, i) +
                   ": a (stage, micro-batch) runs either B and W, or BW, not both", Cell{d, i});
        at[a] = Cell{d, i};
      }
    for (int st = 0; st < l.stages(); ++st)
      for (int mb = 0; mb < l.microbatches; ++mb) {
        auto missing = [&](Kind k) {
          fail("missing " + to_string(Instruction{st, k, mb}) + " (stage " + std::to_string(st) +
                   " lives on device " + std::to_string(l.device_of(st)) + ")", std::nullopt);
        };
        if (!at.count({st, Kind::F, mb})) missing(Kind::F);
        if (at.count({st, Kind::BW, mb})) continue;
        if (!at.count({st, Kind::B, mb})) missing(Kind::B);
        if (!at.count({st, Kind::W, mb})) missing(Kind::W);
      }
    return at;
  }

  // `first` before `second` on their device (a stage lives on one), when both are listed.
  void before(const std::map<Instruction, Cell>& at, Instruction first, Instruction second) const {
    const auto a = at.find(first), b = at.find(second);
    if (a == at.end() || b == at.end() || b->second.index > a->second.index) return;
    fail(to_string(second) + " at " + where(b->second.device, b->second.index) +
             " comes before " + to_string(first) + " at position " +
             std::to_string(a->second.index), b->second);
  }

  void order(const std::map<Instruction, Cell>& at) const {
    for (const auto& [a, cell] : at) {
      const int st = a.stage, mb = a.microbatch;
      if (a.kind == Kind::B || a.kind == Kind::BW) before(at, {st, Kind::F, mb}, a);
      if (a.kind == Kind::W) before(at, {st, Kind::B, mb}, a);
    }
  }

  // Every transfer has its partner; every tensor a compute takes from (or makes for) another
  // device has its receive before it (or its send after it).
  void transfers(const std::map<Instruction, Cell>& at) const {
    for (const auto& [a, cell] : at) {
      if (is_compute(a.kind)) continue;
      const Instruction other = partner(a);
      if (!at.count(other))
        fail(to_string(a) + " at " + where(cell.device, cell.index) + " has no matching " +
                 to_string(other) + " on device " + std::to_string(l.device_of(other.stage)),
             cell);
    }
    // Named references, not a structured binding: the lambdas below capture them, which
    // clang accepts only from version 16 (P1091), and tools/fuzz.sh builds with Debian's 14.
    for (const auto& entry : at) {
      const Instruction& a = entry.first;
      const Cell& cell = entry.second;
      const int st = a.stage, mb = a.microbatch;
      auto elsewhere = [&](int s) {
        return s >= 0 && s < l.stages() && l.device_of(s) != cell.device;
      };
      auto require = [&](Kind k, int from_stage, const char* how) {
        const Instruction t{st, k, mb};
        if (at.count(t)) return;
        fail(to_string(a) + " at " + where(cell.device, cell.index) + " needs " + to_string(t) +
                 ": " + how + " stage " + std::to_string(from_stage) + " on device " +
                 std::to_string(l.device_of(from_stage)), cell);
      };
      const bool forward = a.kind == Kind::F, backward = a.kind == Kind::B || a.kind == Kind::BW;
      if (forward && elsewhere(st - 1)) require(Kind::RecvF, st - 1, "its input comes from");
      if (forward && elsewhere(st + 1)) require(Kind::SendF, st + 1, "its output goes to");
      if (backward && elsewhere(st + 1)) require(Kind::RecvB, st + 1, "its gradient comes from");
      if (backward && elsewhere(st - 1)) require(Kind::SendB, st - 1, "its gradient goes to");
      if (forward) {
        before(at, {st, Kind::RecvF, mb}, a);
        before(at, a, {st, Kind::SendF, mb});
      }
      if (backward) {
        before(at, {st, Kind::RecvB, mb}, a);
        before(at, a, {st, Kind::SendB, mb});
      }
    }
  }
};

LoweredSchedule without_transfers(const Schedule& s) {
  LoweredSchedule l{s.name, s.devices, s.chunks, s.microbatches, s.batch_units, s.placement, {}};
  for (const auto& list : s.lists) {
    auto& out = l.lists.emplace_back();
    for (const Action& a : list) out.push_back(instruction(a));
  }
  return l;
}

}  // namespace

void validate(const Schedule& s) {
  const LoweredSchedule l = without_transfers(s);
  const Checker check{l, &s};
  check.shape();
  check.ranges_and_placement();
  check.order(check.counts());
  const DryRun run = dry_run(s);
  if (!run.finished()) {
    const Stall& first = run.stalls.front();
    check.fail("not progressing after " + std::to_string(run.ticks) + " ticks: " +
                   describe_stalls(s, run),
               Cell{first.device, first.index});
  }
}

void validate(const LoweredSchedule& s, std::optional<int> max_live) {
  const Checker check{s, nullptr};
  check.shape();
  check.ranges_and_placement();
  check.transfer_ends();
  const auto at = check.counts();
  check.order(at);
  check.transfers(at);
  const HappensBefore hb = happens_before(s);
  if (!hb.acyclic())
    check.fail("deadlock: " + describe_cycle(s, hb), cycle_cell(hb, s));
  if (!max_live) return;
  for (int d = 0; d < s.devices; ++d) {
    int live = 0;
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      const Instruction& a = s.lists[d][i];
      live += a.kind == Kind::F ? 1 : (a.kind == Kind::W || a.kind == Kind::BW) ? -1 : 0;
      if (live > *max_live)
        check.fail("device " + std::to_string(d) + " holds " + std::to_string(live) +
                       " live activations after " + to_string(a) + " at " + where(d, i) +
                       ", over the bound of " + std::to_string(*max_live),
                   Cell{d, i});
    }
  }
}

std::vector<int> peak_live(const LoweredSchedule& s) {
  std::vector<int> peak(s.lists.size(), 0);
  for (size_t d = 0; d < s.lists.size(); ++d) {
    int live = 0;
    for (const Instruction& a : s.lists[d]) {
      live += a.kind == Kind::F ? 1 : (a.kind == Kind::W || a.kind == Kind::BW) ? -1 : 0;
      peak[d] = std::max(peak[d], live);
    }
  }
  return peak;
}

}  // namespace brigade::pipeline

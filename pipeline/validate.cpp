#include "pipeline/validate.h"

#include <map>
#include <optional>

#include "pipeline/dry_run.h"
#include "pipeline/grid.h"

namespace brigade::pipeline {

namespace {

std::string where(int device, int index) {
  return "device " + std::to_string(device) + " position " + std::to_string(index);
}

// The lists with one action bracketed: used when the grid cannot be drawn because an action
// is out of range or on the wrong device.
std::string lists_with_mark(const Schedule& s, Cell mark) {
  std::string out;
  for (int d = 0; d < static_cast<int>(s.lists.size()); ++d) {
    out += 'd';
    out += std::to_string(d);
    out += ':';
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      const std::string text = to_string(s.lists[d][i]);
      out += (d == mark.device && i == mark.index) ? " [" + text + "]" : " " + text;
    }
    out += "\n";
  }
  return out;
}

[[noreturn]] void fail(const Schedule& s, const std::string& what, std::optional<Cell> mark,
                       bool grid_possible = true) {
  std::string msg = "schedule '" + s.name + "' is invalid: " + what + "\n" +
                    format_placement(s) + "\n";
  if (grid_possible) msg += format_grid(s, dry_run(s), mark);
  else msg += lists_with_mark(s, *mark);
  throw ScheduleError(msg);
}

void check_shape(const Schedule& s) {
  if (s.devices < 1 || s.chunks < 1 || s.microbatches < 1 || s.batch_units < 1)
    throw ScheduleError("schedule '" + s.name + "' is invalid: devices=" +
                        std::to_string(s.devices) + ", chunks=" + std::to_string(s.chunks) +
                        ", microbatches=" + std::to_string(s.microbatches) + ", batch_units=" +
                        std::to_string(s.batch_units) + " (each must be at least 1)");
  if (static_cast<int>(s.lists.size()) != s.devices)
    throw ScheduleError("schedule '" + s.name + "' is invalid: it has " +
                        std::to_string(s.lists.size()) + " lists for " +
                        std::to_string(s.devices) + " devices");
}

void check_ranges_and_placement(const Schedule& s) {
  for (int d = 0; d < s.devices; ++d)
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      const Action& a = s.lists[d][i];
      const std::string name = to_string(a);
      if (a.stage < 0 || a.stage >= s.stages())
        fail(s, name + " at " + where(d, i) + ": stage out of range (there are " +
                    std::to_string(s.stages()) + " stages)", Cell{d, i}, false);
      if (a.microbatch < 0 || a.microbatch >= s.microbatches)
        fail(s, name + " at " + where(d, i) + ": micro-batch out of range (m = " +
                    std::to_string(s.microbatches) + ")", Cell{d, i}, false);
      if (s.device_of(a.stage) != d)
        fail(s, name + " at " + where(d, i) + ": stage " + std::to_string(a.stage) +
                    " lives on device " + std::to_string(s.device_of(a.stage)),
             Cell{d, i}, false);
    }
}

// Where each (stage, op, micro-batch) sits; duplicates and B/BW mixtures are reported here.
using Key = std::tuple<int, Op, int>;

std::map<Key, Cell> check_counts(const Schedule& s) {
  std::map<Key, Cell> at;
  for (int d = 0; d < s.devices; ++d)
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      const Action& a = s.lists[d][i];
      const Key key{a.stage, a.op, a.microbatch};
      if (auto it = at.find(key); it != at.end())
        fail(s, to_string(a) + " appears twice (" + where(it->second.device, it->second.index) +
                    " and " + where(d, i) + ")", Cell{d, i});
      // A (stage, micro-batch) runs either B then W, or BW: never both kinds.
      const bool fused = a.op == Op::BW;
      const bool split = a.op == Op::B || a.op == Op::W;
      const Key other_b{a.stage, Op::B, a.microbatch}, other_w{a.stage, Op::W, a.microbatch},
          other_bw{a.stage, Op::BW, a.microbatch};
      if ((fused && (at.count(other_b) || at.count(other_w))) || (split && at.count(other_bw)))
        fail(s, to_string(a) + " at " + where(d, i) +
                    ": a (stage, micro-batch) runs either B and W, or BW, not both",
             Cell{d, i});
      at[key] = Cell{d, i};
    }
  for (int st = 0; st < s.stages(); ++st)
    for (int mb = 0; mb < s.microbatches; ++mb) {
      auto missing = [&](Op op) {
        fail(s, "missing " + to_string(Action{st, op, mb}) + " (stage " + std::to_string(st) +
                    " lives on device " + std::to_string(s.device_of(st)) + ")",
             std::nullopt);
      };
      if (!at.count({st, Op::F, mb})) missing(Op::F);
      if (at.count({st, Op::BW, mb})) continue;
      if (!at.count({st, Op::B, mb})) missing(Op::B);
      if (!at.count({st, Op::W, mb})) missing(Op::W);
    }
  return at;
}

void check_order(const Schedule& s, const std::map<Key, Cell>& at) {
  auto before = [&](Key first, Key second) {
    const Cell a = at.at(first), b = at.at(second);  // same device: a stage lives on one
    if (b.index < a.index) {
      const Action later{std::get<0>(second), std::get<1>(second), std::get<2>(second)};
      const Action earlier{std::get<0>(first), std::get<1>(first), std::get<2>(first)};
      fail(s, to_string(later) + " at " + where(b.device, b.index) + " comes before " +
                  to_string(earlier) + " at position " + std::to_string(a.index),
           b);
    }
  };
  for (const auto& [key, cell] : at) {
    const auto [st, op, mb] = key;
    if (op == Op::B || op == Op::BW) before({st, Op::F, mb}, key);
    if (op == Op::W) before({st, Op::B, mb}, key);
  }
}

}  // namespace

void validate(const Schedule& s) {
  check_shape(s);
  check_ranges_and_placement(s);
  check_order(s, check_counts(s));
  const DryRun run = dry_run(s);
  if (!run.finished()) {
    const Stall& first = run.stalls.front();
    fail(s, "not progressing after " + std::to_string(run.ticks) + " ticks: " +
                describe_stalls(s, run),
         Cell{first.device, first.index});
  }
}

}  // namespace brigade::pipeline

#include "pipeline/schedule/happens_before.h"

#include <algorithm>
#include <map>

namespace brigade::pipeline {

namespace {

struct Graph {
  std::vector<size_t> first;  // first[d]: node number of lists[d][0]
  std::vector<Cell> cell;     // node -> (device, index)
  std::vector<bool> unmatched;  // a receive whose send is nowhere: it would wait forever
  std::vector<std::vector<std::pair<size_t, Edge>>> before, after;  // predecessors, successors

  size_t node(Cell c) const { return first[c.device] + c.index; }
  void add(Cell from, Cell to, Edge why) {
    before[node(to)].push_back({node(from), why});
    after[node(from)].push_back({node(to), why});
  }
};

Graph build(const LoweredSchedule& s) {
  Graph g;
  std::map<Instruction, Cell> where;  // the first place each instruction appears
  for (int d = 0; d < static_cast<int>(s.lists.size()); ++d) {
    g.first.push_back(g.cell.size());
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      g.cell.push_back({d, i});
      where.insert({s.lists[d][i], Cell{d, i}});
    }
  }
  g.before.resize(g.cell.size());
  g.after.resize(g.cell.size());
  g.unmatched.resize(g.cell.size());

  // An edge from `producer` (if it is on device d) to `to`.
  auto data = [&](std::initializer_list<Instruction> producers, Cell to) {
    for (const Instruction& p : producers)
      if (auto it = where.find(p); it != where.end() && it->second.device == to.device)
        g.add(it->second, to, Edge::Data);
  };
  for (int d = 0; d < static_cast<int>(s.lists.size()); ++d)
    for (int i = 0; i < static_cast<int>(s.lists[d].size()); ++i) {
      const Instruction& ins = s.lists[d][i];
      const Cell here{d, i};
      const int st = ins.stage, mb = ins.microbatch;
      if (i > 0) g.add({d, i - 1}, here, Edge::Order);
      switch (ins.kind) {
        case Kind::SendF: data({{st, Kind::F, mb}}, here); break;
        case Kind::SendB: data({{st, Kind::B, mb}, {st, Kind::BW, mb}}, here); break;
        case Kind::RecvF:
        case Kind::RecvB:
          if (auto it = where.find(partner(ins)); it != where.end())
            g.add(it->second, here, Edge::Transfer);
          else
            g.unmatched[g.node(here)] = true;
          break;
        default:
          for (const Need& n : needs(compute_action(ins), s.stages())) {
            if (s.device_of(n.stage) != d) {  // it arrives by a receive on this device
              data({{st, n.phase == Phase::Forward ? Kind::RecvF : Kind::RecvB, mb}}, here);
              continue;
            }
            const int ns = n.stage;
            switch (n.phase) {
              case Phase::Forward: data({{ns, Kind::F, mb}}, here); break;
              case Phase::InputGrad: data({{ns, Kind::B, mb}, {ns, Kind::BW, mb}}, here); break;
              case Phase::WeightGrad: data({{ns, Kind::W, mb}, {ns, Kind::BW, mb}}, here); break;
            }
          }
      }
    }
  return g;
}

// Unfinished nodes each have an unfinished predecessor; walking back along them must close
// a loop. The walk prefers the list-order predecessor, so it leaves a device only at the
// first instruction there that cannot start: the cycle reads as one wait per device.
std::vector<Step> find_cycle(const Graph& g, const std::vector<int>& level) {
  size_t start = 0;
  while (level[start] >= 0) ++start;
  std::vector<size_t> path{start};
  std::vector<Edge> why;  // why[t]: the edge path[t+1] -> path[t]
  std::map<size_t, size_t> seen{{start, 0}};
  for (;;) {
    const size_t cur = path.back();
    std::pair<size_t, Edge> back{0, Edge::Order};
    bool found = false;
    for (const auto& [p, e] : g.before[cur])
      if (level[p] < 0 && (!found || e == Edge::Order)) {
        back = {p, e};
        found = true;
        if (e == Edge::Order) break;
      }
    why.push_back(back.second);
    if (auto it = seen.find(back.first); it != seen.end()) {
      // path[k..] closes: path[j] -> path[j-1] -> ... -> path[k] -> path[j].
      const size_t k = it->second, j = path.size() - 1;
      std::vector<Step> cycle;
      for (size_t t = j; t > k; --t)
        cycle.push_back({g.cell[path[t]], g.cell[path[t - 1]], why[t - 1]});
      cycle.push_back({g.cell[path[k]], g.cell[path[j]], why[j]});
      return cycle;
    }
    seen[back.first] = path.size();
    path.push_back(back.first);
  }
}

bool before_cell(Cell a, Cell b) {
  return a.device != b.device ? a.device < b.device : a.index < b.index;
}

// The step the story starts from: the transfer into the receive on the lowest device.
size_t start_step(const HappensBefore& hb) {
  size_t best = 0;
  bool transfer = false;
  for (size_t t = 0; t < hb.cycle.size(); ++t) {
    const bool is_transfer = hb.cycle[t].why == Edge::Transfer;
    if ((is_transfer && !transfer) ||
        (is_transfer == transfer && before_cell(hb.cycle[t].to, hb.cycle[best].to))) {
      best = t;
      transfer = is_transfer;
    }
  }
  return best;
}

std::string name_at(const LoweredSchedule& s, Cell c) {
  return to_string(s.lists[c.device][c.index]) + " (device " + std::to_string(c.device) +
         ", position " + std::to_string(c.index) + ")";
}

// Kahn's algorithm: level[v] is one more than the latest level among v's predecessors, or
// -1 when v never becomes ready (on or behind a cycle; with `block_unmatched`, also behind a
// receive whose send is nowhere).
std::vector<int> levels(const Graph& g, bool block_unmatched) {
  const size_t n = g.cell.size();
  std::vector<size_t> waiting(n);
  std::vector<int> level(n, -1), earliest(n, 0);
  std::vector<size_t> ready;
  for (size_t v = 0; v < n; ++v) {
    waiting[v] = g.before[v].size() + (block_unmatched && g.unmatched[v] ? 1 : 0);
    if (waiting[v] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    const size_t v = ready.back();
    ready.pop_back();
    level[v] = earliest[v];
    for (const auto& [w, e] : g.after[v]) {
      earliest[w] = std::max(earliest[w], level[v] + 1);
      if (--waiting[w] == 0) ready.push_back(w);
    }
  }
  return level;
}

}  // namespace

HappensBefore happens_before(const LoweredSchedule& s) {
  const Graph g = build(s);
  const std::vector<int> level = levels(g, true);
  HappensBefore hb;
  hb.tick.resize(s.lists.size());
  for (size_t v = 0; v < level.size(); ++v) {
    hb.tick[g.cell[v].device].push_back(level[v]);
    hb.ticks = std::max(hb.ticks, level[v] + 1);
  }
  // A cycle is looked for among what cannot run even when every receive finds a send.
  const std::vector<int> unblocked = levels(g, false);
  if (std::find(unblocked.begin(), unblocked.end(), -1) != unblocked.end())
    hb.cycle = find_cycle(g, unblocked);
  return hb;
}

Cell cycle_cell(const HappensBefore& hb, const LoweredSchedule&) {
  return hb.cycle.at(start_step(hb)).to;
}

std::string describe_cycle(const LoweredSchedule& s, const HappensBefore& hb) {
  if (hb.cycle.empty()) return "";
  const size_t L = hb.cycle.size(), start = start_step(hb);
  const Cell first = hb.cycle[start].to;
  std::string out = "device " + std::to_string(first.device) + " waits on itself: " +
                    name_at(s, first);
  // Walk the cycle backwards: each step's `to` waits for its `from`. A run of list-order
  // steps is told once, from its last instruction to its first.
  for (size_t k = 0; k < L;) {
    const Step& step = hb.cycle[(start + L - k) % L];
    size_t run = 1;
    if (step.why == Edge::Order)
      while (run < L - k && hb.cycle[(start + L - k - run) % L].why == Edge::Order) ++run;
    const Cell from = hb.cycle[(start + L - k - (run - 1)) % L].from;
    static const char* verb[] = {" comes after ", " waits for ", " needs "};
    out += (k == 0 ? "" : ", which");
    out += verb[static_cast<int>(step.why)];
    out += name_at(s, from);
    k += run;
  }
  return out;
}

}  // namespace brigade::pipeline

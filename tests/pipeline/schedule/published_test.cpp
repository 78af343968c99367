// Brigade's generators beside the published ones (docs/schedules.md, "Every schedule the field
// uses"): at F = B = W, no transfer cost and the same memory, v-half, zb-v and interleaved-zb
// are as short as the orders the zero-bubble authors' generators (sail-sg's v_schedule and
// zbv_greedy) and PyTorch's ScheduleInterleavedZeroBubble / ScheduleZBVZeroBubble give; and no
// generator is slower, or holds more, than it did before they got there (the figures below,
// recorded from the generators of f97ffe7).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/simulator.h"
#include "pipeline/schedule/validate.h"

namespace bp = brigade::pipeline;

namespace {

// f, b, w for a device's whole share of the model: a chunk of v costs 1/v of each, so a V's
// chunk costs half a unit and the published figures end in .5.
bp::CostModel share_costs(int chunks, double b = 1) {
  bp::CostModel c;
  c.uniform = {.f = 1.0 / chunks, .b = b / chunks, .w = 1.0 / chunks};
  return c;
}

struct Measured {
  double makespan;
  double memory;  // the fullest device's peak, in micro-batches of a device's share
};

Measured measure(const std::string& name, int p, int m, double b = 1) {
  const int v = bp::default_chunks(name);
  const bp::CostModel costs = share_costs(v, b);
  const bp::Schedule s = bp::make_schedule(name, p, m, v, costs);
  bp::validate(s);
  const bp::Simulation sim = bp::simulate(s, costs);
  int peak = 0;
  for (const bp::DeviceStats& d : sim.stats.devices) peak = std::max(peak, d.peak_in_flight);
  return {sim.stats.makespan, double(peak) / v};
}

// `name` at p, m and unit costs is valid, no longer than `makespan` and holds no more than
// `memory` on any device.
void holds_to(const std::string& name, int p, int m, double makespan, double memory) {
  CAPTURE(name);
  CAPTURE(p);
  CAPTURE(m);
  const Measured ours = measure(name, p, m);
  CHECK(ours.makespan <= makespan + 1e-9);
  CHECK(ours.memory <= memory + 1e-9);
}

// The published orders at unit costs, as simulated here: makespan and memory (the table of
// issue #28).
struct Published {
  const char* name;
  int p, m;
  double makespan, memory;
};
const Published kPublished[] = {
    {"v-half", 2, 4, 12.5, 2},         {"v-half", 2, 8, 24.5, 2},
    {"v-half", 4, 8, 26.5, 3},         {"v-half", 4, 16, 50.5, 3},
    {"v-half", 8, 8, 32.5, 4.5},       {"v-half", 8, 16, 56.5, 5},
    {"v-half", 8, 32, 104.5, 5},       {"zb-v", 2, 4, 12.5, 2},
    {"zb-v", 2, 8, 24.5, 2},           {"zb-v", 8, 16, 51.5, 8},
    {"zb-v", 8, 32, 99.5, 8},          {"interleaved-zb", 4, 16, 49.5, 4},
    {"interleaved-zb", 8, 16, 51.5, 8}, {"interleaved-zb", 8, 32, 99.5, 8},
};

// Before: makespan at unit costs, at f = 1, b = 2, w = 1, and the memory at unit costs, for
// p in {2, 4, 8} and m in {p, 2p, 4p} (dualpipe-v from m = 2p).
struct Before {
  const char* name;
  int p, m;
  double unit, heavy_backward, memory;
};
const Before kBefore[] = {
    {"naive", 2, 2, 12, 16, 1},
    {"gpipe", 2, 2, 9, 12, 2},
    {"1f1b", 2, 2, 9, 12, 2},
    {"interleaved-1f1b", 2, 2, 7.5, 10, 2},
    {"looped-bfs", 2, 2, 7.5, 10, 2},
    {"zb-h1", 2, 2, 7, 10, 2},
    {"zb-h2", 2, 2, 7, 10, 2},
    {"zb-auto", 2, 2, 7, 10, 2},
    {"interleaved-zb", 2, 2, 6.5, 9, 2},
    {"zb-v", 2, 2, 6.5, 9.5, 2},
    {"v-half", 2, 2, 6.5, 9.5, 2},
    {"v-min", 2, 2, 6.5, 9.5, 2},
    {"naive", 2, 4, 24, 32, 1},
    {"gpipe", 2, 4, 15, 20, 4},
    {"1f1b", 2, 4, 15, 20, 2},
    {"interleaved-1f1b", 2, 4, 13.5, 18, 2.5},
    {"looped-bfs", 2, 4, 13.5, 18, 4},
    {"zb-h1", 2, 4, 13, 18, 2},
    {"zb-h2", 2, 4, 13, 17, 3},
    {"zb-auto", 2, 4, 13, 18, 2},
    {"interleaved-zb", 2, 4, 12.5, 18.5, 2},
    {"zb-v", 2, 4, 13, 19, 2},
    {"v-half", 2, 4, 13, 19, 2},
    {"v-min", 2, 4, 13, 19, 2},
    {"dualpipe-v", 2, 4, 12.5, 17, 2.5},
    {"naive", 2, 8, 48, 64, 1},
    {"gpipe", 2, 8, 27, 36, 8},
    {"1f1b", 2, 8, 27, 36, 2},
    {"interleaved-1f1b", 2, 8, 25.5, 34, 2.5},
    {"looped-bfs", 2, 8, 25.5, 34, 8},
    {"zb-h1", 2, 8, 25, 34, 2},
    {"zb-h2", 2, 8, 25, 33, 3},
    {"zb-auto", 2, 8, 25, 34, 2},
    {"interleaved-zb", 2, 8, 24.5, 37.5, 2},
    {"zb-v", 2, 8, 25, 37, 2},
    {"v-half", 2, 8, 25, 37, 2},
    {"v-min", 2, 8, 25, 37, 2},
    {"dualpipe-v", 2, 8, 24.5, 33, 2.5},
    {"naive", 4, 4, 48, 64, 1},
    {"gpipe", 4, 4, 21, 28, 4},
    {"1f1b", 4, 4, 21, 28, 4},
    {"interleaved-1f1b", 4, 4, 16.5, 22, 4},
    {"looped-bfs", 4, 4, 16.5, 22, 4},
    {"zb-h1", 4, 4, 15, 22, 4},
    {"zb-h2", 4, 4, 15, 22, 4},
    {"zb-auto", 4, 4, 15, 22, 4},
    {"interleaved-zb", 4, 4, 13.5, 20.5, 4},
    {"zb-v", 4, 4, 13.5, 20.5, 4},
    {"v-half", 4, 4, 16.5, 26.5, 3},
    {"v-min", 4, 4, 17, 27.5, 2.5},
    {"naive", 4, 8, 96, 128, 1},
    {"gpipe", 4, 8, 33, 44, 8},
    {"1f1b", 4, 8, 33, 44, 4},
    {"interleaved-1f1b", 4, 8, 28.5, 38, 5.5},
    {"looped-bfs", 4, 8, 28.5, 38, 8},
    {"zb-h1", 4, 8, 27, 38, 4},
    {"zb-h2", 4, 8, 27, 35, 7},
    {"zb-auto", 4, 8, 27, 38, 4},
    {"interleaved-zb", 4, 8, 25.5, 42, 4},
    {"zb-v", 4, 8, 25.5, 43.5, 4},
    {"v-half", 4, 8, 27.5, 47.5, 3},
    {"v-min", 4, 8, 29.5, 54.5, 2},
    {"dualpipe-v", 4, 8, 25.5, 36, 4.5},
    {"naive", 4, 16, 192, 256, 1},
    {"gpipe", 4, 16, 57, 76, 16},
    {"1f1b", 4, 16, 57, 76, 4},
    {"interleaved-1f1b", 4, 16, 52.5, 70, 5.5},
    {"looped-bfs", 4, 16, 52.5, 70, 16},
    {"zb-h1", 4, 16, 51, 70, 4},
    {"zb-h2", 4, 16, 51, 67, 7},
    {"zb-auto", 4, 16, 51, 70, 4},
    {"interleaved-zb", 4, 16, 50, 81.5, 4},
    {"zb-v", 4, 16, 49.5, 89.5, 4},
    {"v-half", 4, 16, 51.5, 95.5, 3},
    {"v-min", 4, 16, 53.5, 102.5, 2},
    {"dualpipe-v", 4, 16, 49.5, 68, 4.5},
    {"naive", 8, 8, 192, 256, 1},
    {"gpipe", 8, 8, 45, 60, 8},
    {"1f1b", 8, 8, 45, 60, 8},
    {"interleaved-1f1b", 8, 8, 34.5, 46, 8},
    {"looped-bfs", 8, 8, 34.5, 46, 8},
    {"zb-h1", 8, 8, 31, 46, 8},
    {"zb-h2", 8, 8, 31, 46, 8},
    {"zb-auto", 8, 8, 31, 46, 8},
    {"interleaved-zb", 8, 8, 27.5, 43, 8},
    {"zb-v", 8, 8, 27.5, 42.5, 8},
    {"v-half", 8, 8, 34.5, 58.5, 5},
    {"v-min", 8, 8, 36.5, 62.5, 4},
    {"naive", 8, 16, 384, 512, 1},
    {"gpipe", 8, 16, 69, 92, 16},
    {"1f1b", 8, 16, 69, 92, 8},
    {"interleaved-1f1b", 8, 16, 58.5, 78, 11.5},
    {"looped-bfs", 8, 16, 58.5, 78, 16},
    {"zb-h1", 8, 16, 55, 78, 8},
    {"zb-h2", 8, 16, 55, 71, 15},
    {"zb-auto", 8, 16, 55, 78, 8},
    {"interleaved-zb", 8, 16, 53, 90, 8},
    {"zb-v", 8, 16, 53.5, 95.5, 8},
    {"v-half", 8, 16, 58.5, 104, 5},
    {"v-min", 8, 16, 61.5, 114.5, 4},
    {"dualpipe-v", 8, 16, 51.5, 74, 8.5},
    {"naive", 8, 32, 768, 1024, 1},
    {"gpipe", 8, 32, 117, 156, 32},
    {"1f1b", 8, 32, 117, 156, 8},
    {"interleaved-1f1b", 8, 32, 106.5, 142, 11.5},
    {"looped-bfs", 8, 32, 106.5, 142, 32},
    {"zb-h1", 8, 32, 103, 142, 8},
    {"zb-h2", 8, 32, 103, 135, 15},
    {"zb-auto", 8, 32, 103, 142, 8},
    {"interleaved-zb", 8, 32, 101, 180, 8},
    {"zb-v", 8, 32, 101, 188, 8},
    {"v-half", 8, 32, 107.5, 204.5, 5},
    {"v-min", 8, 32, 109.5, 210.5, 4},
    {"dualpipe-v", 8, 32, 99.5, 138, 8.5},
};

}  // namespace

TEST_CASE("v-half, zb-v and interleaved-zb: as short as the published orders, as little memory") {
  for (const Published& row : kPublished) {
    // v-half at p = 8, m = 8: the published order holds 4.5, Brigade's 5 (its budget, p/2 + 1).
    const bool known_gap = std::string(row.name) == "v-half" && row.p == 8 && row.m == 8;
    holds_to(row.name, row.p, row.m, row.makespan, known_gap ? 5.0 : row.memory);
  }
}

TEST_CASE("no generator is slower, or holds more, than before the published orders were reached") {
  for (const Before& row : kBefore) {
    // v-min at p = 4 now fills its budget (ceil(2p/3) + 2 chunks, 2.5 micro-batches) for a
    // unit less time; before, its shortest order happened to hold 2.
    const bool fills_budget = std::string(row.name) == "v-min" && row.p == 4 && row.m > row.p;
    holds_to(row.name, row.p, row.m, row.unit, fills_budget ? 2.5 : row.memory);
    CAPTURE(row.name);
    CAPTURE(row.p);
    CAPTURE(row.m);
    CHECK(measure(row.name, row.p, row.m, 2).makespan <= row.heavy_backward + 1e-9);
  }
}

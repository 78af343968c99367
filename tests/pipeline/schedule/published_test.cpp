// Brigade's generators beside the published ones (docs/schedules.md, "Every schedule the field
// uses"): at F = B = W, no transfer cost and the same memory, v-half, zb-v and interleaved-zb
// are as short as the orders the zero-bubble authors' generators (sail-sg's v_schedule and
// zbv_greedy) and PyTorch's ScheduleInterleavedZeroBubble / ScheduleZBVZeroBubble give; v-half
// and v-min are as short as the authors' V-Half and V-Min at f = 1, b = 2, w = 1 too, at no more
// memory; reorder_as_published (squeeze.h) gives the authors' orders themselves; and no
// generator is slower, or holds more, than it did before they got there (the figures below,
// recorded from the generators of f97ffe7).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "pipeline/schedule/generators/generators.h"
#include "pipeline/schedule/generators/squeeze.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/pytorch_csv.h"
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
  double makespan;        // at unit costs
  double heavy_backward;  // at f = 1, b = 2, w = 1
  double memory;  // the fullest device's peak at unit costs, in micro-batches of a device's share
};

// The schedule is made once for both costs, unless it plans for them (zb-auto): the others
// give the same lists whatever the costs, and making them is the slow part.
Measured measure(const std::string& name, int p, int m) {
  const int v = bp::default_chunks(name);
  const bp::CostModel unit = share_costs(v), heavy = share_costs(v, 2);
  const bp::Schedule s = bp::make_schedule(name, p, m, v, unit);
  bp::validate(s);
  const bp::Simulation sim = bp::simulate(s, unit);
  int peak = 0;
  for (const bp::DeviceStats& d : sim.stats.devices) peak = std::max(peak, d.peak_in_flight);
  const bp::Schedule planned_heavy = bp::schedule_kind(name).needs_costs
                                         ? bp::make_schedule(name, p, m, v, heavy)
                                         : s;
  return {sim.stats.makespan, bp::simulate(planned_heavy, heavy).stats.makespan,
          double(peak) / v};
}

// `name` at p, m is valid, no longer than `makespan` at unit costs and `heavy_backward` at
// f = 1, b = 2, w = 1, and holds no more than `memory` on any device.
void holds_to(const std::string& name, int p, int m, double makespan, double memory,
              double heavy_backward) {
  CAPTURE(name);
  CAPTURE(p);
  CAPTURE(m);
  const Measured ours = measure(name, p, m);
  CHECK(ours.makespan <= makespan + 1e-9);
  CHECK(ours.memory <= memory + 1e-9);
  CHECK(ours.heavy_backward <= heavy_backward + 1e-9);
}

constexpr double kNoBound = std::numeric_limits<double>::infinity();

// The published orders at unit costs, as simulated here: makespan and memory, the fullest
// device's. (The authors' V-Half at p = 8, m = 8 holds 4.5 on device 0 and 5 on the seven
// others: their generator's output, below.)
struct Published {
  const char* name;
  int p, m;
  double makespan, memory;
};
const Published kPublished[] = {
    {"v-half", 2, 4, 12.5, 2},         {"v-half", 2, 8, 24.5, 2},
    {"v-half", 4, 8, 26.5, 3},         {"v-half", 4, 16, 50.5, 3},
    {"v-half", 8, 8, 32.5, 5},       {"v-half", 8, 16, 56.5, 5},
    {"v-half", 8, 32, 104.5, 5},       {"zb-v", 2, 4, 12.5, 2},
    {"zb-v", 2, 8, 24.5, 2},           {"zb-v", 8, 16, 51.5, 8},
    {"zb-v", 8, 32, 99.5, 8},          {"interleaved-zb", 4, 16, 49.5, 4},
    {"interleaved-zb", 8, 16, 51.5, 8}, {"interleaved-zb", 8, 32, 99.5, 8},
};

// Published orders at both costs, as simulated here: makespan at unit costs and at f = 1,
// b = 2, w = 1, and the chunk-micro-batches the fullest device holds.
//   v-half, v-min: the authors' V-Half and V-Min (sail-sg/zero-bubble-pipeline-parallelism,
//     zbv_greedy.py, its reordering of the building block run with their code);
//   zb-v, interleaved-zb: PyTorch's ScheduleZBVZeroBubble (the zero-bubble paper's ZB-V as
//     drawn) and ScheduleInterleavedZeroBubble (v = 2), each at 1F1B's memory as Brigade's
//     budgets.
struct PublishedOrder {
  const char* name;
  int p, m;
  double unit, heavy_backward;
  int fullest;
};
const PublishedOrder kPublishedOrders[] = {
    {"v-half", 2, 2, 7.5, 11.5, 4},       {"v-half", 2, 4, 12.5, 18, 4},
    {"v-half", 2, 8, 24.5, 36, 4},        {"v-half", 4, 4, 17, 26, 6},
    {"v-half", 4, 8, 26.5, 41, 6},        {"v-half", 4, 16, 50.5, 77, 6},
    {"v-half", 8, 8, 32.5, 54, 10},       {"v-half", 8, 16, 56.5, 88, 10},
    {"v-half", 8, 32, 104.5, 160, 10},    {"v-min", 2, 2, 7.5, 11.5, 4},
    {"v-min", 2, 4, 13.5, 21.5, 4},       {"v-min", 2, 8, 25.5, 41.5, 4},
    {"v-min", 4, 4, 17.5, 30.5, 4},       {"v-min", 4, 8, 29.5, 54.5, 4},
    {"v-min", 4, 16, 53.5, 102.5, 4},     {"v-min", 8, 8, 37.5, 65.5, 8},
    {"v-min", 8, 16, 61.5, 113.5, 8},     {"v-min", 8, 32, 109.5, 209.5, 8},
    {"zb-v", 2, 2, 7, 10, 4},             {"zb-v", 2, 4, 12.5, 17, 4},
    {"zb-v", 2, 8, 24.5, 33, 4},          {"zb-v", 4, 4, 15, 22, 8},
    {"zb-v", 4, 8, 25.5, 35, 8},          {"zb-v", 4, 16, 49.5, 67, 8},
    {"zb-v", 8, 8, 31, 46, 16},           {"zb-v", 8, 16, 51.5, 71, 16},
    {"zb-v", 8, 32, 99.5, 135, 16},       {"interleaved-zb", 2, 2, 6.5, 9, 4},
    {"interleaved-zb", 2, 4, 12.5, 17, 4}, {"interleaved-zb", 2, 8, 24.5, 33, 4},
    {"interleaved-zb", 4, 4, 13.5, 19, 8}, {"interleaved-zb", 4, 8, 25.5, 35, 8},
    {"interleaved-zb", 4, 16, 49.5, 67, 8}, {"interleaved-zb", 8, 8, 27.5, 39, 16},
    {"interleaved-zb", 8, 16, 51.5, 71, 16}, {"interleaved-zb", 8, 32, 99.5, 135, 16},
};

// PyTorch's ZBV and interleaved zero bubble at p = 2, m = 4, as their
// _calculate_single_rank_operations write them (I is PyTorch's backward for the input,
// Brigade's B), and what they simulate to: the rows of kPublishedOrders above.
struct PyTorchFile {
  const char* csv;
  double unit, heavy_backward;
};
const PyTorchFile kPyTorchFiles[] = {
    {"0F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,0I1,0W1,3F3,3I3,3W3,0I2,0W2,"
     "0I3,0W3\n"
     ",1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,1F3,1I1,1W1,2F3,2I2,2W2,1I2,2I3,1I3,1W2,"
     "2W3,1W3\n",
     12.5, 17},
    {"0F0,0F1,2F0,2F1,2I0,2W0,0F2,2I1,2W1,0F3,0I0,0W0,2F2,0I1,0W1,2F3,2I2,2W2,2I3,2W3,0I2,0W2,"
     "0I3,0W3\n"
     "1F0,1F1,3F0,3I0,3F1,3I1,3W0,1F2,1I0,3W1,1F3,1I1,1W0,3F2,3I2,1W1,3F3,3I3,3W2,1I2,3W3,1I3,"
     "1W2,1W3\n",
     12.5, 17},
};

// The same lists with a transfer cost (comm = 0.1 of a device's F) besides, and PyTorch's
// interleaved zero bubble at p = 2, m = 2, whose lists its m = 4 ones above are built as:
// Brigade's orders are no slower at F = B = W and at b = 2F.
struct PyTorchOrder {
  const char* schedule;
  int m;
  const char* csv;
};
const PyTorchOrder kPyTorchOrders[] = {
    {"zb-v", 4, kPyTorchFiles[0].csv},
    {"interleaved-zb", 4, kPyTorchFiles[1].csv},
    {"interleaved-zb", 2,
     "0F0,0F1,2F0,2F1,2I0,2W0,2I1,2W1,0I0,0W0,0I1,0W1\n"
     "1F0,1F1,3F0,3I0,3F1,3I1,3W0,1I0,3W1,1I1,1W0,1W1\n"},
};

// The paper's building block (Qi et al., 2024, and the authors' stable patterns), written here
// from the paper rather than taken from v_shapes.cpp: device i's F of chunk 0, F of chunk 1,
// B of chunk 1 and B of chunk 0 for micro-batch k, in unit k * 6 + these offsets.
bp::UnitTimes paper_block(const std::string& name, int p, int m) {
  bp::UnitTimes units(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    const bool half = name == "v-half";
    const int g = half ? (p % 2 == 0 ? 3 : 0) : (p % 3 == 0 ? 2 : 0);
    const int at[4] = {half ? 2 * i : i, half ? 3 * p - 2 - i : 2 * p - 1 - i,
                       half ? 3 * p + g + 2 * i - 1 : 2 * p + g + i,
                       half ? 6 * p + g - 2 - i : 4 * p + g - 1 - i};
    for (int k = 0; k < m; ++k) {
      auto& unit = units[static_cast<size_t>(i)];
      unit[at[0] + 6 * k] = {i, bp::Op::F, k};
      unit[at[1] + 6 * k] = {2 * p - 1 - i, bp::Op::F, k};
      unit[at[2] + 6 * k] = {2 * p - 1 - i, bp::Op::B, k};
      unit[at[3] + 6 * k] = {i, bp::Op::B, k};
    }
  }
  return units;
}

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
  for (const Published& row : kPublished)  // (no published figure at b = 2F for these)
    holds_to(row.name, row.p, row.m, row.makespan, row.memory, kNoBound);
}

TEST_CASE("PyTorch's ZBV and interleaved zero bubble files simulate to their figures") {
  for (const PyTorchFile& f : kPyTorchFiles) {
    const bp::Schedule file = bp::compute_only(bp::parse_pytorch_csv(f.csv, "pytorch.csv").lists);
    CHECK_NOTHROW(bp::validate(file));
    CHECK(bp::simulate(file, share_costs(2)).stats.makespan == doctest::Approx(f.unit));
    CHECK(bp::simulate(file, share_costs(2, 2)).stats.makespan ==
          doctest::Approx(f.heavy_backward));
  }
}

TEST_CASE("reorder_as_published gives the authors' V-Half and V-Min, their times and memory") {
  for (const PublishedOrder& row : kPublishedOrders) {
    if (std::string(row.name) != "v-half" && std::string(row.name) != "v-min") continue;
    CAPTURE(row.name);
    CAPTURE(row.p);
    CAPTURE(row.m);
    bp::Schedule shape = bp::make_schedule(row.name, row.p, row.m, 2);
    for (auto& list : shape.lists) list.clear();
    const bp::Schedule s = bp::reorder_as_published(shape, paper_block(row.name, row.p, row.m));
    CHECK_NOTHROW(bp::validate(s));
    const bp::Simulation unit = bp::simulate(s, share_costs(2));
    CHECK(unit.stats.makespan == doctest::Approx(row.unit));
    const bp::Simulation heavy = bp::simulate(s, share_costs(2, 2));
    CHECK(heavy.stats.makespan == doctest::Approx(row.heavy_backward));
    int fullest = 0;
    for (const bp::DeviceStats& d : unit.stats.devices)
      fullest = std::max(fullest, d.peak_in_flight);
    CHECK(fullest == row.fullest);
    // Their V-Half at p = 8, m = 8 holds 4.5 micro-batches on device 0 alone.
    if (std::string(row.name) == "v-half" && row.p == 8 && row.m == 8)
      CHECK(unit.stats.devices.front().peak_in_flight == 9);
  }
}

TEST_CASE("v-half, v-min, zb-v, interleaved-zb: as short as published at b = F and b = 2F") {
  for (const PublishedOrder& row : kPublishedOrders)
    holds_to(row.name, row.p, row.m, row.unit, row.fullest / 2.0, row.heavy_backward);
}

TEST_CASE("no generator is slower, or holds more, than before the published orders were reached") {
  for (const Before& row : kBefore) {
    // v-min at p = 4, m = 4 holds the authors' 2 micro-batches (their V-Min's 17.5 and 30.5),
    // where it held 2.5 for 17 and 27.5: a fifth less memory for half a unit (one unit at
    // b = 2F). No published order is 17 at 2: the authors' own V-Min order, run through
    // their reordering (kPublishedOrders, reorder_as_published above), is 17.5 at 2.
    const bool holds_less = std::string(row.name) == "v-min" && row.p == 4 && row.m == 4;
    holds_to(row.name, row.p, row.m, holds_less ? 17.5 : row.unit, row.memory,
             holds_less ? 28.5 : row.heavy_backward);
  }
}

TEST_CASE("zb-v and interleaved-zb: as short as PyTorch's orders with a transfer cost too") {
  for (const PyTorchOrder& order : kPyTorchOrders)
    for (double b : {1.0, 2.0}) {
      CAPTURE(order.schedule);
      CAPTURE(order.m);
      CAPTURE(b);
      bp::CostModel c = share_costs(2, b);
      c.comm = 0.1;
      const bp::Schedule theirs =
          bp::compute_only(bp::parse_pytorch_csv(order.csv, "pytorch.csv").lists);
      REQUIRE_NOTHROW(bp::validate(theirs));
      const bp::Schedule ours = bp::make_schedule(order.schedule, 2, order.m, 2);
      CHECK(bp::simulate(ours, c).stats.makespan <=
            bp::simulate(theirs, c).stats.makespan + 1e-9);
    }
  // The case where interleaved-zb's order was 9.6 against PyTorch's 9.4: now 9.4 too.
  bp::CostModel c = share_costs(2, 2);
  c.comm = 0.1;
  CHECK(bp::simulate(bp::make_schedule("interleaved-zb", 2, 2, 2), c).stats.makespan ==
        doctest::Approx(9.4));
}

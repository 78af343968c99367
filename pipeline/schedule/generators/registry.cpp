#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

namespace detail {

Schedule empty_schedule(const char* name, int devices, int microbatches, int chunks) {
  auto why = [&](const char* what, int value) {
    return std::string(name) + ": " + what + " must be at least 1, got " + std::to_string(value);
  };
  if (devices < 1) throw std::invalid_argument(why("devices (p)", devices));
  if (microbatches < 1) throw MicrobatchCountError(why("micro-batches (m)", microbatches));
  if (chunks < 1) throw std::invalid_argument(why("chunks per device (v)", chunks));
  Schedule s;
  s.name = name;
  s.devices = devices;
  s.microbatches = microbatches;
  s.chunks = chunks;
  s.lists.resize(devices);
  return s;
}

}  // namespace detail

namespace {

// The generators behind one signature: (p, m, v, costs, bounds), each taking what it uses.
Schedule make_naive(int p, int m, int v, const CostModel&, const std::vector<int>&) {
  return naive(p, m, v);
}
Schedule make_gpipe(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return gpipe(p, m);
}
Schedule make_1f1b(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return one_f_one_b(p, m);
}
Schedule make_interleaved_1f1b(int p, int m, int v, const CostModel&, const std::vector<int>&) {
  return interleaved_1f1b(p, m, v);
}
Schedule make_looped_bfs(int p, int m, int v, const CostModel&, const std::vector<int>&) {
  return looped_bfs(p, m, v);
}
Schedule make_zb_h1(int p, int m, int, const CostModel& costs, const std::vector<int>&) {
  return zb_h1(p, m, costs);
}
Schedule make_zb_h2(int p, int m, int, const CostModel& costs, const std::vector<int>&) {
  return zb_h2(p, m, costs);
}
Schedule make_zb_auto(int p, int m, int, const CostModel& costs, const std::vector<int>& bounds) {
  return bounds.empty() ? zb_auto(p, m, costs) : zb_auto(p, m, costs, bounds);
}
Schedule make_interleaved_zb(int p, int m, int v, const CostModel&, const std::vector<int>&) {
  return interleaved_zb(p, m, v);
}
Schedule make_zb_v(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return zb_v(p, m);
}
Schedule make_v_half(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return v_half(p, m);
}
Schedule make_v_min(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return v_min(p, m);
}
Schedule make_dualpipe_v(int p, int m, int, const CostModel&, const std::vector<int>&) {
  return dualpipe_v(p, m);
}

using enum Chunks;
using enum Placement;

// Every schedule by name, in the order the tools list them.
const std::vector<ScheduleKind> kSchedules = {
    {"naive", any, 1, looped, false, make_naive},
    {"gpipe", one, 1, looped, false, make_gpipe},
    {"1f1b", one, 1, looped, false, make_1f1b},
    {"interleaved-1f1b", any, 2, looped, false, make_interleaved_1f1b},
    {"looped-bfs", any, 2, looped, false, make_looped_bfs},
    {"zb-h1", one, 1, looped, true, make_zb_h1},
    {"zb-h2", one, 1, looped, true, make_zb_h2},
    {"zb-auto", one, 1, looped, true, make_zb_auto},
    {"interleaved-zb", any, 2, looped, false, make_interleaved_zb},
    {"zb-v", two, 2, v_shape, false, make_zb_v},
    {"v-half", two, 2, v_shape, false, make_v_half},
    {"v-min", two, 2, v_shape, false, make_v_min},
    {"dualpipe-v", two, 2, v_shape, false, make_dualpipe_v},
};

}  // namespace

const std::vector<ScheduleKind>& schedule_kinds() { return kSchedules; }

const ScheduleKind* find_schedule(std::string_view name) {
  for (const ScheduleKind& k : kSchedules)
    if (k.name == name) return &k;
  return nullptr;
}

const ScheduleKind& schedule_kind(std::string_view name) {
  if (const ScheduleKind* k = find_schedule(name)) return *k;
  std::string known;
  for (const ScheduleKind& k : kSchedules) {
    known += ' ';
    known += k.name;
  }
  throw std::invalid_argument("unknown schedule '" + std::string(name) + "'; known:" + known);
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ScheduleKind& k : kSchedules) out.emplace_back(k.name);
    return out;
  }();
  return names;
}

Placement placement_of(std::string_view name) {
  const ScheduleKind* k = find_schedule(name);
  return k ? k->placement : Placement::looped;
}

int default_chunks(std::string_view name) {
  const ScheduleKind* k = find_schedule(name);
  return k ? k->default_chunks : 1;
}

Schedule make_schedule(std::string_view name, int devices, int microbatches, int chunks,
                       const CostModel& costs, const std::vector<int>& max_in_flight) {
  const ScheduleKind& k = schedule_kind(name);
  if (k.chunks == Chunks::one && chunks != 1)
    throw std::invalid_argument(std::string(name) + " places one stage per device, so it needs "
                                "chunks=1 (got " + std::to_string(chunks) +
                                "); interleaved-1f1b, looped-bfs, interleaved-zb and naive "
                                "take several chunks");
  if (k.chunks == Chunks::two && chunks != 2)
    throw std::invalid_argument(std::string(name) + " places two stages per device in a V, so "
                                "it needs chunks=2 (got " + std::to_string(chunks) + ")");
  return k.make(devices, microbatches, chunks, costs, max_in_flight);
}

}  // namespace brigade::pipeline

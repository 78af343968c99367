#include <stdexcept>

#include "pipeline/schedule/generators/generators.h"

namespace brigade::pipeline {

namespace detail {

Schedule empty_schedule(const char* name, int devices, int microbatches, int chunks) {
  auto positive = [&](const char* what, int value) {
    if (value < 1)
      throw std::invalid_argument(std::string(name) + ": " + what + " must be at least 1, got " +
                                  std::to_string(value));
  };
  positive("devices (p)", devices);
  positive("micro-batches (m)", microbatches);
  positive("chunks per device (v)", chunks);
  Schedule s;
  s.name = name;
  s.devices = devices;
  s.microbatches = microbatches;
  s.chunks = chunks;
  s.lists.resize(devices);
  return s;
}

}  // namespace detail

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {
      "naive",          "gpipe", "1f1b",   "interleaved-1f1b", "looped-bfs",
      "zb-h1",          "zb-h2", "zb-auto", "interleaved-zb",  "zb-v",
      "v-half",         "v-min", "dualpipe-v"};
  return names;
}

Placement placement_of(std::string_view name) {
  const bool v = name == "zb-v" || name == "v-half" || name == "v-min" || name == "dualpipe-v";
  return v ? Placement::v_shape : Placement::looped;
}

int default_chunks(std::string_view name) {
  const bool several = name == "interleaved-1f1b" || name == "looped-bfs" ||
                       name == "interleaved-zb" || placement_of(name) == Placement::v_shape;
  return several ? 2 : 1;
}

Schedule make_schedule(std::string_view name, int devices, int microbatches, int chunks,
                       const CostModel& costs, const std::vector<int>& max_in_flight) {
  auto one_chunk = [&]() {
    if (chunks != 1)
      throw std::invalid_argument(std::string(name) + " places one stage per device, so it needs "
                                  "chunks=1 (got " + std::to_string(chunks) +
                                  "); interleaved-1f1b, looped-bfs, interleaved-zb and naive "
                                  "take several chunks");
  };
  auto two_chunks = [&]() {
    if (chunks != 2)
      throw std::invalid_argument(std::string(name) + " places two stages per device in a V, so "
                                  "it needs chunks=2 (got " + std::to_string(chunks) + ")");
  };
  if (name == "naive") return naive(devices, microbatches, chunks);
  if (name == "gpipe") return one_chunk(), gpipe(devices, microbatches);
  if (name == "1f1b") return one_chunk(), one_f_one_b(devices, microbatches);
  if (name == "interleaved-1f1b") return interleaved_1f1b(devices, microbatches, chunks);
  if (name == "looped-bfs") return looped_bfs(devices, microbatches, chunks);
  if (name == "zb-h1") return one_chunk(), zb_h1(devices, microbatches);
  if (name == "zb-h2") return one_chunk(), zb_h2(devices, microbatches);
  if (name == "zb-auto")
    return one_chunk(), max_in_flight.empty()
                            ? zb_auto(devices, microbatches, costs)
                            : zb_auto(devices, microbatches, costs, max_in_flight);
  if (name == "interleaved-zb") return interleaved_zb(devices, microbatches, chunks);
  if (name == "zb-v") return two_chunks(), zb_v(devices, microbatches);
  if (name == "v-half") return two_chunks(), v_half(devices, microbatches);
  if (name == "v-min") return two_chunks(), v_min(devices, microbatches);
  if (name == "dualpipe-v") return two_chunks(), dualpipe_v(devices, microbatches);
  std::string known;
  for (const auto& n : schedule_names()) known += " " + n;
  throw std::invalid_argument("unknown schedule '" + std::string(name) + "'; known:" + known);
}

}  // namespace brigade::pipeline

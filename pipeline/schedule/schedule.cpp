#include "pipeline/schedule/schedule.h"

#include <sstream>
#include <stdexcept>

namespace brigade::pipeline {

namespace {

// "d3:". Strings in this file are built by appending: GCC 12 at -O3 misreports
// `"d" + std::to_string(d)` under -Wrestrict.
std::string device_label(size_t d) {
  std::string label = "d";
  label += std::to_string(d);
  label += ':';
  return label;
}

}  // namespace

const char* placement_name(Placement placement) {
  return placement == Placement::looped ? "looped" : "v-shape";
}

Placement parse_placement(std::string_view text) {
  if (text == "looped") return Placement::looped;
  if (text == "v-shape") return Placement::v_shape;
  throw std::invalid_argument("placement '" + std::string(text) + "': expected looped or v-shape");
}

int stage_device(int stage, int devices, Placement placement) {
  const int chunk = stage / devices, position = stage % devices;
  const bool back_up = placement == Placement::v_shape && chunk % 2 == 1;
  return back_up ? devices - 1 - position : position;
}

std::vector<int> Schedule::stages_on(int device) const {
  std::vector<int> out;
  for (int s = 0; s < stages(); ++s)
    if (device_of(s) == device) out.push_back(s);
  return out;
}

size_t Schedule::total_actions() const {
  size_t n = 0;
  for (const auto& list : lists) n += list.size();
  return n;
}

std::string format_placement(const Schedule& s) {
  std::string out = "stage -> device:";
  if (s.placement != Placement::looped) {
    out += " (";
    out += placement_name(s.placement);
    out += ')';
  }
  for (int st = 0; st < s.stages(); ++st) {
    out += ' ';
    out += std::to_string(st);
    out += "->d";
    out += std::to_string(s.device_of(st));
  }
  return out;
}

std::string format_lists(const Schedule& s) {
  std::string out;
  for (size_t d = 0; d < s.lists.size(); ++d) {
    out += device_label(d);
    for (const Action& a : s.lists[d]) {
      out += ' ';
      out += to_string(a);
    }
    out += "\n";
  }
  return out;
}

Schedule parse_schedule(std::string_view text, int chunks, int microbatches, std::string name) {
  Schedule s;
  s.name = std::move(name);
  s.chunks = chunks;
  s.microbatches = microbatches;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string head;
    if (!(words >> head)) continue;  // blank line
    const std::string expect = device_label(s.lists.size());
    if (head != expect)
      throw std::invalid_argument("schedule line " + std::to_string(line_no) + ": expected '" +
                                  expect + "' at the start, got '" + head + "'");
    auto& list = s.lists.emplace_back();
    for (std::string word; words >> word;) {
      try {
        list.push_back(parse_action(word));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("schedule line " + std::to_string(line_no) + ": " + e.what());
      }
    }
  }
  if (s.lists.empty()) throw std::invalid_argument("schedule text has no 'd0:' line");
  s.devices = static_cast<int>(s.lists.size());
  return s;
}

}  // namespace brigade::pipeline

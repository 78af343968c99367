#include "pipeline/schedule/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace brigade::pipeline {

namespace {

// Peak in-flight count and bytes on one device: a (stage, micro-batch) is in flight from the
// start of its F to the end of its W or BW. At equal times frees go first: a W that ends as
// an F starts hands its memory over, as a caching allocator would.
void in_flight_peaks(const Timeline& t, const std::vector<double>& bytes_per_stage,
                     std::vector<DeviceStats>& out) {
  struct Change { double time; int delta; double bytes; };
  std::vector<std::vector<Change>> changes(t.devices);
  for (const TimelineEvent& e : t.events) {
    if (e.lane != 0) continue;
    const double bytes = bytes_per_stage.empty() ? 0 : bytes_per_stage.at(e.action.stage);
    if (e.action.op == Op::F) changes[e.device].push_back({e.start, +1, bytes});
    if (e.action.op == Op::W || e.action.op == Op::BW)
      changes[e.device].push_back({e.end, -1, -bytes});
  }
  for (int d = 0; d < t.devices; ++d) {
    auto& c = changes[d];
    std::sort(c.begin(), c.end(), [](const Change& a, const Change& b) {
      return std::tie(a.time, a.delta) < std::tie(b.time, b.delta);
    });
    int count = 0;
    double bytes = 0;
    for (const Change& ch : c) {
      count += ch.delta;
      bytes += ch.bytes;
      out[d].peak_in_flight = std::max(out[d].peak_in_flight, count);
      out[d].peak_activation_bytes = std::max(out[d].peak_activation_bytes, bytes);
    }
  }
}

}  // namespace

std::string event_name(const Timeline& t, const TimelineEvent& e) {
  const size_t lane = static_cast<size_t>(e.lane);
  const std::string which = lane < t.lanes.size() ? t.lanes[lane] : "";
  if (which != "send" && which != "recv") return to_string(e.action);
  std::string out = std::to_string(e.action.stage);
  out += which == "send" ? 'S' : 'R';
  out += e.action.op == Op::F ? 'F' : 'B';
  out += std::to_string(e.action.microbatch);
  return out;
}

void join_sends_to_receives(Timeline& t) {
  t.flows.clear();
  const auto lane = [&](const std::string& name) {
    const auto at = std::find(t.lanes.begin(), t.lanes.end(), name);
    return at == t.lanes.end() ? -1 : static_cast<int>(at - t.lanes.begin());
  };
  const int send = lane("send"), recv = lane("recv");
  if (send < 0 || recv < 0) return;  // a timeline with no transfers drawn
  std::map<std::tuple<int, int, bool>, size_t> receive;  // (stage, micro-batch, activation)
  for (size_t i = 0; i < t.events.size(); ++i) {
    const TimelineEvent& e = t.events[i];
    if (e.lane == recv) receive[{e.action.stage, e.action.microbatch, e.action.op == Op::F}] = i;
  }
  for (size_t i = 0; i < t.events.size(); ++i) {
    const TimelineEvent& e = t.events[i];
    if (e.lane != send) continue;
    const bool forward = e.action.op == Op::F;  // an activation goes to the next stage's F
    const int stage = e.action.stage + (forward ? 1 : -1);
    const auto to = receive.find({stage, e.action.microbatch, forward});
    if (to != receive.end()) t.flows.push_back({i, to->second});
  }
}

TimelineStats measure(const Timeline& t, const std::vector<double>& bytes_per_stage) {
  TimelineStats stats;
  stats.devices.resize(t.devices);
  if (t.events.empty()) return stats;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  std::vector<double> own_first(static_cast<size_t>(t.devices), first);
  std::vector<double> own_last(static_cast<size_t>(t.devices), last);
  for (const TimelineEvent& e : t.events) {
    if (e.device < 0 || e.device >= t.devices)
      throw std::invalid_argument("timeline '" + t.title + "': event " + to_string(e.action) +
                                  " on device " + std::to_string(e.device) + " of " +
                                  std::to_string(t.devices));
    first = std::min(first, e.start);
    last = std::max(last, e.end);
    if (e.lane != 0) continue;
    stats.devices[e.device].busy += e.end - e.start;
    own_first[e.device] = std::min(own_first[e.device], e.start);
    own_last[e.device] = std::max(own_last[e.device], e.end);
  }
  stats.makespan = last - first;
  double idle = 0, idle_inside = 0, spans = 0;
  for (int d = 0; d < t.devices; ++d) {
    DeviceStats& s = stats.devices[d];
    s.idle = stats.makespan - s.busy;
    idle += s.idle;
    if (s.busy == 0) continue;  // a device with nothing to do has no span
    s.idle_inside = own_last[d] - own_first[d] - s.busy;
    idle_inside += s.idle_inside;
    spans += own_last[d] - own_first[d];
  }
  stats.bubble_fraction = stats.makespan > 0 ? idle / (t.devices * stats.makespan) : 0;
  stats.bubble_inside_fraction = spans > 0 ? idle_inside / spans : 0;
  in_flight_peaks(t, bytes_per_stage, stats.devices);
  return stats;
}

}  // namespace brigade::pipeline

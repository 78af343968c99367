#include "pipeline/runtime/step_trace.h"

namespace brigade::pipeline {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StepTrace::StepTrace(const std::vector<Device>& devices)
    : t0_(std::chrono::steady_clock::now()),
      devices_(devices),
      origin_ms_(devices.size(), 0.0),
      markers_(devices.size()),
      sent_bytes_(devices.size(), 0) {
  for (size_t d = 0; d < devices.size(); ++d) origins_.push_back(Event::timed());  // not copies
}

uint64_t StepTrace::sent_bytes() const {
  uint64_t total = 0;
  for (uint64_t bytes : sent_bytes_) total += bytes;
  return total;
}

void StepTrace::start(int d, const Stream& compute, bool behind_previous_step) {
  const size_t i = static_cast<size_t>(d);
  if (!devices_[i].is_cuda()) return;
  origins_[i].record(compute);
  origin_ms_[i] = behind_previous_step ? 0.0 : ms_since(t0_);
}

void StepTrace::mark(int d, TraceLane lane, const Action& a, const Stream& s, bool start) {
  std::deque<Marker>& list = markers_[static_cast<size_t>(d)];
  if (start) {
    list.emplace_back();
    list.back().action = a;
    list.back().lane = lane;
  }
  Marker* m = &list.back();
  if (s.device().is_cuda()) {  // no host tasks on a CUDA stream: an event, timed after the step
    (start ? m->start_event : m->end_event).record(s);
    return;
  }
  s.enqueue([m, t0 = t0_, start] { (start ? m->start : m->end) = ms_since(t0); });
}

void StepTrace::read_cuda_markers() {
  for (size_t d = 0; d < markers_.size(); ++d) {
    if (!devices_[d].is_cuda()) continue;
    for (Marker& m : markers_[d]) {
      m.start = origin_ms_[d] + elapsed_ms(origins_[d], m.start_event);
      m.end = origin_ms_[d] + elapsed_ms(origins_[d], m.end_event);
    }
  }
}

std::optional<std::pair<int, Action>> StepTrace::unfinished() const {
  std::optional<std::pair<int, Action>> found;
  for (size_t d = 0; d < markers_.size(); ++d)
    for (const Marker& m : markers_[d])
      if (m.lane != TraceLane::recv && m.start >= 0 && m.end < 0)
        found = {static_cast<int>(d), m.action};
  return found;
}

Timeline StepTrace::timeline(const Schedule& schedule) const {
  Timeline t;
  t.title = schedule.name + " measured";
  t.devices = schedule.devices;
  t.chunks = schedule.chunks;
  t.unit = "ms";
  t.microseconds_per_unit = 1000;
  t.lanes = {"compute", "send", "recv"};
  t.sent_bytes = sent_bytes();
  for (size_t d = 0; d < markers_.size(); ++d)
    for (const Marker& m : markers_[d])
      t.events.push_back({static_cast<int>(d), static_cast<int>(m.lane), m.action, m.start, m.end});
  join_sends_to_receives(t);
  return t;
}

}  // namespace brigade::pipeline

#include "pipeline/schedule/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace brigade::pipeline {

std::string chrome_trace_json(const Timeline& t) {
  using nlohmann::json;
  json events = json::array();
  // Metadata events name the rows: "device 0" / "compute".
  for (int d = 0; d < t.devices; ++d) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", d}, {"tid", 0},
                      {"args", {{"name", "device " + std::to_string(d)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", d}, {"tid", 0},
                      {"args", {{"sort_index", d}}}});
    for (size_t lane = 0; lane < t.lanes.size(); ++lane)
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", d}, {"tid", lane},
                        {"args", {{"name", t.lanes[lane]}}}});
  }
  for (const TimelineEvent& e : t.events) {
    events.push_back({{"ph", "X"},
                      {"name", event_name(t, e)},
                      {"cat", op_name(e.action.op)},
                      {"pid", e.device},
                      {"tid", e.lane},
                      {"ts", e.start * t.microseconds_per_unit},
                      {"dur", (e.end - e.start) * t.microseconds_per_unit},
                      {"args",
                       {{"stage", e.action.stage},
                        {"op", op_name(e.action.op)},
                        {"microbatch", e.action.microbatch}}}});
  }
  for (size_t k = 0; k < t.flows.size(); ++k) {
    const TimelineEvent& from = t.events.at(t.flows[k].from);
    const TimelineEvent& to = t.events.at(t.flows[k].to);
    const std::string name = event_name(t, from);
    events.push_back({{"ph", "s"}, {"id", k}, {"name", name}, {"cat", "transfer"},
                      {"pid", from.device}, {"tid", from.lane},
                      {"ts", from.start * t.microseconds_per_unit}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", k}, {"name", name}, {"cat", "transfer"},
                      {"pid", to.device}, {"tid", to.lane},
                      {"ts", to.end * t.microseconds_per_unit}});
  }
  json doc = {{"traceEvents", events},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"title", t.title}, {"unit", t.unit}, {"sent_bytes", t.sent_bytes}}}};
  return doc.dump(1);
}

}  // namespace brigade::pipeline

// Timeline: what ran where and when — the neutral record that the simulator produces and the
// runtime will produce from measured events, so that both are drawn (svg.h, chrome_trace.h)
// and measured (measure()) by the same code.
//
// An event is one action on one lane of one device. Lane 0 is "compute"; a runtime may add
// lanes for its send and receive streams. Busy time and bubbles count lane 0 only.
#pragma once

#include <string>
#include <vector>

#include "pipeline/action.h"

namespace brigade::pipeline {

struct TimelineEvent {
  int device = 0;
  int lane = 0;  // index into Timeline::lanes
  Action action;
  double start = 0, end = 0;
};

struct Timeline {
  std::string title;
  int devices = 1;
  int chunks = 1;                  // stages per device, for colouring chunks apart
  std::string unit = "unit";       // the time unit, for axis labels
  double microseconds_per_unit = 1000;  // for Chrome traces (abstract units drawn as 1 ms)
  std::vector<std::string> lanes = {"compute"};
  std::vector<TimelineEvent> events;
};

struct DeviceStats {
  double busy = 0;                   // summed duration of its compute-lane events
  double idle = 0;                   // makespan - busy
  int peak_in_flight = 0;            // (stage, micro-batch) pairs between F start and W end
  double peak_activation_bytes = 0;  // their bytes at the worst instant
};

struct TimelineStats {
  double makespan = 0;         // last end - first start
  double bubble_fraction = 0;  // idle / (devices · makespan)
  std::vector<DeviceStats> devices;
};

// bytes_per_stage[s]: activation bytes one micro-batch leaves on stage s (empty: none).
TimelineStats measure(const Timeline& t, const std::vector<double>& bytes_per_stage = {});

}  // namespace brigade::pipeline

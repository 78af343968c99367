// Timeline: what ran where and when — the neutral record that the simulator produces and the
// runtime will produce from measured events, so that both are drawn (svg.h, chrome_trace.h)
// and measured (measure()) by the same code.
//
// An event is one action on one lane of one device. Lane 0 is "compute"; a runtime may add
// lanes for its send and receive streams. Busy time and bubbles count lane 0 only. On a lane
// named "send" an event's action is the one whose result goes (0F3 for 0SF3); on "recv", the
// stage that receives, F for an activation and B for a gradient (1F3 for 1RF3). A flow joins
// a send to its receive: Chrome traces draw it as an arrow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

struct TimelineEvent {
  int device = 0;
  int lane = 0;  // index into Timeline::lanes
  Action action;
  double start = 0, end = 0;
};

struct Flow {
  size_t from = 0, to = 0;  // indices into Timeline::events
};

struct Timeline {
  std::string title;
  int devices = 1;
  int chunks = 1;                  // stages per device, for colouring chunks apart
  std::string unit = "unit";       // the time unit, for axis labels
  double microseconds_per_unit = 1000;  // for Chrome traces (abstract units drawn as 1 ms)
  std::vector<std::string> lanes = {"compute"};
  std::vector<TimelineEvent> events;
  std::vector<Flow> flows;
  // The bytes sent between devices during a measured step (StepResult::sent_bytes): a bf16
  // run's are half an fp32 run's. 0 for a simulated timeline, which moves no tensors.
  uint64_t sent_bytes = 0;
};

struct DeviceStats {
  double busy = 0;                   // summed duration of its compute-lane events
  double idle = 0;                   // makespan - busy
  double idle_inside = 0;            // idle between the device's own first and last action
  int peak_in_flight = 0;            // (stage, micro-batch) pairs between F start and W end
  double peak_activation_bytes = 0;  // their bytes at the worst instant
};

struct TimelineStats {
  double makespan = 0;         // last end - first start
  double bubble_fraction = 0;  // idle / (devices · makespan)
  // The zero-bubble papers' measure: idle_inside over the devices' own spans, summed. Their
  // steps overlap (the next step's first forwards start while the last device ends this one),
  // so the ramp at either end is not counted; Brigade's step ends when every device ends, and
  // bubble_fraction counts it.
  double bubble_inside_fraction = 0;
  std::vector<DeviceStats> devices;
};

// "1F3" on compute, "0SF3" / "1SB3" on a send lane, "1RF3" / "0RB3" on a receive lane
// (lowering.h's words).
std::string event_name(const Timeline& t, const TimelineEvent& e);

// Replaces `t.flows` by a flow from each event on the lane named "send" to the event on the
// lane named "recv" that takes its tensor: the next stage's F for an activation (0F3 -> 1F3),
// the stage before's B for a gradient (1B3 -> 0B3). Matched by (stage, op, micro-batch), not
// by device or process, so that it joins the events of several processes' timelines merged
// into one (tools/train/rank_reports.h) as it joins one process's; a send or receive whose
// partner is not in `t` has no flow.
void join_sends_to_receives(Timeline& t);

// bytes_per_stage[s]: activation bytes one micro-batch leaves on stage s (empty: none).
TimelineStats measure(const Timeline& t, const std::vector<double>& bytes_per_stage = {});

}  // namespace brigade::pipeline

// Chrome trace: a Timeline as trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open. Each device is a process (pid = device), each lane a thread
// (tid = lane); each action is a complete event {"ph":"X", "ts", "dur"} in microseconds,
// named by its text form ("1F3", "0SF3" on a send lane) with its stage, op and micro-batch in
// "args". Each Timeline flow is an arrow from a send to its receive: a flow start {"ph":"s"}
// at the send's start and a flow end {"ph":"f", "bp":"e"} at the receive's end, one id each.
// "otherData" holds the title, the time unit and the bytes sent between devices (sent_bytes:
// a measured step's count, 0 for a simulated schedule).
#pragma once

#include <string>

#include "pipeline/schedule/timeline.h"

namespace brigade::pipeline {

// The trace as JSON text. Writing it is the program's business (engine/output_file.h): this
// library makes data and text only, and stands on no other Brigade library.
std::string chrome_trace_json(const Timeline& t);

}  // namespace brigade::pipeline

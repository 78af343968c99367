// Schedule files: a schedule as text a person can read, edit and hand back.
//
//   # brigade schedule: one line per device, in the order the device runs them
//   name: 1f1b
//   devices: 2
//   chunks: 1
//   microbatches: 2
//   d0: 0F0 0SF0 0F1 0SF1 0RB0 0BW0 0RB1 0BW1
//   d1: 1RF0 1F0 1BW0 1SB0 1RF1 1F1 1BW1 1SB1
//
// The header (before the first device line) says `devices` and `microbatches` (required),
// `chunks` (stages per device, default 1), `name` (default: where the text came from),
// `batch_units` (default 1) and `placement` (looped or v-shape, schedule.h; default looped). Then one line per device, d0, d1, ... in order, of actions
// (action.h) and, in a lowered file, transfers (lowering.h). A file without transfers is
// compute-only: lowering adds them. '#' starts a comment; blank lines are skipped.
//
// A file whose name ends in ".csv" is PyTorch's schedule CSV instead (pytorch_csv.h): the
// readers below take both.
//
// Errors name the source and the line — "my.schedule:7: action '1Q3': ..." — and, for a
// schedule that reads but does not validate, the line and the action validate() marked.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct ScheduleText {
  LoweredSchedule lists;             // as written: compute-only or lowered
  std::vector<int> line_of_device;   // line (from 1) of each device's list
  bool lowered() const { return lists.has_transfers(); }
};

std::string format_schedule_text(const Schedule& s);
std::string format_schedule_text(const LoweredSchedule& s);

// Throws std::invalid_argument "SOURCE:LINE: ..." for text that does not read.
ScheduleText parse_schedule_text(std::string_view text, const std::string& source);
ScheduleText read_schedule_file(const std::string& path);

// Reads the file, validates what it holds (validate.h), lowers it if it is compute-only and
// validates the lowered lists with the bound on live activations: the lists to simulate.
// A ScheduleError names the file, the line and the action ("f:5: 1RF0: schedule ...").
LoweredSchedule load_schedule(const std::string& path, std::optional<int> max_live = std::nullopt);

// The compute-only lists of a file for a runtime that runs them (it communicates inside its
// F and B, as lower() places the transfers): a lowered file is accepted when its transfers
// are exactly where lower() puts them, and refused, naming the first difference, otherwise.
Schedule load_compute_schedule(const std::string& path);

}  // namespace brigade::pipeline

// The grid: devices down, dry-run ticks across, one action per cell, "." for a bubble.
//
//   tick    0    1    2    3    4    5    6    7
//   d0    0F0  0F1    .    . 0BW0    . 0BW1    .      <- p = 2, m = 2, 1F1B
//   d1      .  1F0 1BW0  1F1 1BW1
//
// A cell can be marked: it is printed in brackets, [1B3], and its column gets a '^' below.
// Actions the dry run never reached are listed after the row: "| never ran: 2B3 2W3".
// Lowered lists (lowering.h) print the same way, on the clock of happens_before.h: every
// instruction, a transfer included, takes one tick.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/schedule/dry_run.h"
#include "pipeline/schedule/lowering.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct Cell {
  int device;
  int index;  // position in that device's list
};

std::string format_grid(const Schedule& s, const DryRun& run,
                        std::optional<Cell> mark = std::nullopt);

// Convenience: dry-runs s (which must pass the range checks) and formats it.
std::string format_grid(const Schedule& s);

// Lowered lists on the happens-before clock (stages and micro-batches must be in range).
std::string format_grid(const LoweredSchedule& s, std::optional<Cell> mark = std::nullopt);

// What all of them print: texts[d][i] is device d's i-th entry, tick[d][i] the tick it ran
// at (-1: never), `ticks` the number of columns.
std::string format_grid(const std::vector<std::vector<std::string>>& texts,
                        const std::vector<std::vector<int>>& tick, int ticks,
                        std::optional<Cell> mark);

}  // namespace brigade::pipeline

// Schedule: a pipeline step as data — for each device, the ordered list of its actions.
//
// p devices hold p·v stages, v "chunks" per device. The placement is explicit and the same
// for every schedule (Megatron's interleaving): stage s lives on device s mod p, so with
// p = 2, v = 2 device 0 holds stages 0 and 2 and device 1 holds stages 1 and 3. With v = 1
// stage s is simply device s.
//
// `batch_units` says how much work one micro-batch of this schedule carries, counted in the
// cost model's micro-batches: the naive schedule runs the whole mini-batch of m micro-batches
// as one, so its batch_units is m and each of its actions costs m times as much.
//
// Text form (format_lists / parse_schedule), one line per device:
//   d0: 0F0 0F1 0BW0 0BW1
//   d1: 1F0 1BW0 1F1 1BW1
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/schedule/action.h"

namespace brigade::pipeline {

struct Schedule {
  std::string name;
  int devices = 1;       // p
  int chunks = 1;        // v: stages per device
  int microbatches = 1;  // m
  int batch_units = 1;   // cost-model micro-batches per micro-batch (naive: m)
  std::vector<std::vector<Action>> lists;  // lists[device], in execution order

  int stages() const { return devices * chunks; }
  int device_of(int stage) const { return stage % devices; }
  std::vector<int> stages_on(int device) const;  // ascending
  size_t total_actions() const;
};

// "stage -> device: 0->d0 1->d1 2->d0 3->d1"
std::string format_placement(const Schedule& s);
// One line per device, actions in text form.
std::string format_lists(const Schedule& s);
// Reads the form format_lists writes ("d0: 0F0 ..."; blank lines and '#' comments skipped).
// Lines must name devices 0, 1, ... in order. Throws std::invalid_argument naming the line.
Schedule parse_schedule(std::string_view text, int chunks, int microbatches,
                        std::string name = "parsed");

}  // namespace brigade::pipeline

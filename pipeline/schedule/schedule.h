// Schedule: a pipeline step as data — for each device, the ordered list of its actions.
//
// p devices hold p·v stages, v "chunks" per device: chunk c is stages c·p .. c·p + p - 1. The
// placement says which device runs each stage, and is one of two:
//   looped   (Megatron's interleaving) every chunk runs down the devices: stage s lives on
//            device s mod p, so with p = 2, v = 2 device 0 holds stages 0 and 2;
//   v-shape  (ZB-V, V-Half, V-Min, DualPipeV) the chunks zigzag: even chunks run down the
//            devices, odd ones back up, so with v = 2 device d holds stages d and 2p - 1 - d.
//            The stage after each turn is on the same device (it needs no transfer) and the
//            first and last stages share device 0, which both feeds and ends the pipeline.
//   p = 3, v = 2:   looped   d0: 0 3   d1: 1 4   d2: 2 5
//                   v-shape  d0: 0 5   d1: 1 4   d2: 2 3
// With v = 1 both are the identity: stage s is device s.
//
// `batch_units` says how much work one micro-batch of this schedule carries, counted in the
// cost model's micro-batches: a schedule file that runs the mini-batch of k cost-model
// micro-batches as one says `batch_units: k`, and each of its actions costs k times as much.
// The generators all write 1 (naive runs its m micro-batches one after another).
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

enum class Placement { looped, v_shape };

const char* placement_name(Placement placement);  // "looped", "v-shape"
// Reads placement_name's words; throws std::invalid_argument naming the text.
Placement parse_placement(std::string_view text);
// The device of `stage` among `devices` (stage >= 0; any stage index, so that a caller may ask
// about the neighbour past either end).
int stage_device(int stage, int devices, Placement placement);

struct Schedule {
  std::string name;
  int devices = 1;       // p
  int chunks = 1;        // v: stages per device
  int microbatches = 1;  // m
  int batch_units = 1;   // cost-model micro-batches per micro-batch (1 from the generators)
  Placement placement = Placement::looped;
  std::vector<std::vector<Action>> lists;  // lists[device], in execution order

  int stages() const { return devices * chunks; }
  int device_of(int stage) const { return stage_device(stage, devices, placement); }
  std::vector<int> stages_on(int device) const;  // ascending
  size_t total_actions() const;
};

// "stage -> device: 0->d0 1->d1 2->d0 3->d1" (with " (v-shape)" after the colon for that one)
std::string format_placement(const Schedule& s);
// One line per device, actions in text form.
std::string format_lists(const Schedule& s);
// Reads the form format_lists writes ("d0: 0F0 ..."; blank lines and '#' comments skipped).
// Lines must name devices 0, 1, ... in order. Throws std::invalid_argument naming the line.
Schedule parse_schedule(std::string_view text, int chunks, int microbatches,
                        std::string name = "parsed");

}  // namespace brigade::pipeline

// Lowering: a compute-only schedule becomes per-device lists that also say where every
// tensor crosses between devices — PyTorch pipelining's SEND_F / RECV_F / SEND_B / RECV_B.
//
// An Instruction is a compute action (F, B, W, BW) or one end of a transfer between
// neighbouring stages that live on different devices. A transfer names the stage on the
// device that runs it, as PyTorch does:
//   SF  "0SF3"  stage 0 sends the activation of micro-batch 3 to stage 1      (send lane)
//   RF  "1RF3"  stage 1 receives that activation, its input                   (recv lane)
//   SB  "1SB3"  stage 1 sends the gradient of its input to stage 0            (send lane)
//   RB  "0RB3"  stage 0 receives that gradient, its output's gradient          (recv lane)
// So 0SF3 pairs with 1RF3 and 1SB3 with 0RB3: same tensor, micro-batch and stage pair.
//
// The meaning of a lowered list (what validate() proves and simulate() times):
//   - a device issues its instructions in list order; compute runs on its compute stream,
//     sends on its send stream, receives on its receive stream, each stream in list order;
//   - a send never waits for its receiver (the link buffers the tensor, as a Channel does);
//   - a receive completes when its send has delivered, and a compute that uses the tensor
//     waits for that receive.
//
// lower() puts each receive right before the compute that consumes it and each send right
// after the compute that produces it. Lowered lists then wait exactly where the compute-only
// lists waited (a receive on its producer), so lowering a valid schedule gives lists that
// cannot deadlock; validate() proves it again on the lists themselves. Stages live where the
// schedule's placement puts them (Schedule::device_of); neighbours on one device (p = 1, or a
// V-shape's turn) hand over without a transfer.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

enum class Kind { F, B, W, BW, SendF, RecvF, SendB, RecvB };

// The streams of a device; an instruction runs on one of them.
enum class Lane { Compute = 0, Send = 1, Recv = 2 };

struct Instruction {
  int stage = 0;
  Kind kind = Kind::F;
  int microbatch = 0;

  auto operator<=>(const Instruction&) const = default;
};

const char* kind_name(Kind k);                        // "F", "BW", "SF", "RB", ...
std::string to_string(const Instruction& i);          // "1F3", "0SF3", "1RB0"
Instruction parse_instruction(std::string_view text); // throws std::invalid_argument

bool is_compute(Kind k);
Lane lane_of(Kind k);
Instruction instruction(const Action& a);     // the compute instruction of a
Action compute_action(const Instruction& i);  // requires is_compute(i.kind)
// The other end of a transfer: 0SF3 <-> 1RF3, 1SB3 <-> 0RB3. Requires a transfer.
Instruction partner(const Instruction& i);

struct LoweredSchedule {
  std::string name;
  int devices = 1;
  int chunks = 1;
  int microbatches = 1;
  int batch_units = 1;
  Placement placement = Placement::looped;
  std::vector<std::vector<Instruction>> lists;  // lists[device], in issue order

  int stages() const { return devices * chunks; }
  int device_of(int stage) const { return stage_device(stage, devices, placement); }
  size_t total() const;
  bool has_transfers() const;
};

// The compute-only lists of s with the transfers added (see above).
LoweredSchedule lower(const Schedule& s);
// The compute instructions of s, in order: lower(compute_only(l)) == l for lists lower made.
Schedule compute_only(const LoweredSchedule& s);

// "d0: 0F0 0SF0 0RB0 0BW0" — one line per device, like format_lists.
std::string format_lists(const LoweredSchedule& s);

}  // namespace brigade::pipeline

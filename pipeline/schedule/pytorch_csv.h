// PyTorch's schedule CSV: the file torch.distributed.pipelining loads and dumps
// (schedules.py: PipelineScheduleMulti._load_csv / _dump_csv, _PipelineScheduleRuntime's with
// format "compute_only" or "compute_comms"), read and written so that a schedule moves between
// the two systems in either direction.
//
// One row per rank (row r is rank r, Brigade's device r), one cell per action, each the
// string of PyTorch's _Action: stage, kind, micro-batch with nothing between. An empty cell
// is a bubble (PyTorch's None, printed to line the ranks up in time): nothing to run.
//
//   PyTorch          Brigade  what
//   0F3              0F3      forward
//   0I3              0B3      backward for the input (BACKWARD_INPUT)
//   0W3              0W3      backward for the weights (BACKWARD_WEIGHT)
//   0B3              0BW3     the whole backward (FULL_BACKWARD) — PyTorch's B is Brigade's BW
//   0SEND_F3         0SF3     the lowered form's transfers ("compute_comms"): stage 0 sends
//   1RECV_F3         1RF3     micro-batch 3's activation, stage 1 receives it; SEND_B/RECV_B
//   1SEND_B3 0RECV_B3         the input gradient back
//   (0F1;1B0)OVERLAP_F_B      DualPipe's overlapped pair: its actions, one after the other
//                             (Brigade runs one compute stream per device)
//   0UNSHARD 0RESHARD         FSDP's gather and free of a stage's parameters: nothing to do
//                             here (Brigade holds every stage whole; PyTorch does nothing
//                             for a stage without FSDP either): read and dropped
//   0REDUCE_GRAD              the stage's gradients complete (reduced across replicas,
//                             scaled): Brigade does it after a stage's last W or BW, so it is
//                             accepted there or later and dropped; written after that action
//                             in the lowered form, as PyTorch's own lowering places it
//
// PyTorch infers the rest; so does the reader: the stages are 0 .. S-1 (every one must appear,
// each on one rank), chunks S / p, micro-batches 0 .. m-1, and the placement from where the
// stages are — Megatron's looped one (stage s on rank s mod p) or a V (schedule.h). A file
// whose ranks hold stages otherwise (PyTorch takes any map) is refused: Brigade cuts and places
// the model in one of those two shapes. Errors name the file, the line (the rank + 1) and
// the cell. A file with any SEND/RECV is lowered lists, run as written (schedule_text.h).
#pragma once

#include <string>
#include <string_view>

#include "pipeline/schedule/schedule_text.h"

namespace brigade::pipeline {

// PyTorch's "compute_only" CSV of the compute lists; throws std::invalid_argument for a
// schedule PyTorch cannot express (batch_units other than 1).
std::string format_pytorch_csv(const Schedule& s);
// Its "compute_comms" CSV: the lowered lists, with a REDUCE_GRAD after each stage's last W or BW.
std::string format_pytorch_csv(const LoweredSchedule& s);

// Throws std::invalid_argument "SOURCE:LINE: ..." for a file that does not read or that
// Brigade cannot run as PyTorch would (see above); the lists are then validated by the caller.
ScheduleText parse_pytorch_csv(std::string_view text, const std::string& source);

// Whether a schedule file is PyTorch's CSV: its name ends in ".csv".
bool is_pytorch_csv(const std::string& path);

}  // namespace brigade::pipeline

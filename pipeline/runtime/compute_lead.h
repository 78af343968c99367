// How far a device's host thread may run ahead of its compute stream (executor.cpp's
// run_device asks before and after each compute action it issues).
//
// On a CPU device a task holds its tensors (inputs, outputs, the workspace of im2col and GEMM
// packing) until it has run, so a host thread that describes the whole list at once allocates
// every micro-batch's activations before the first is freed: the peak is then what the host
// got ahead by, not what the schedule holds (the question's network at --batch 48 on three
// devices: 110 MB on cpu:1, 28 MB with the bound below). So the host issues compute action k
// only once action k - 2 has run: the stream always has the next action queued behind the
// running one (it never waits for the host), and at most those two actions' transient tensors
// are held beyond the schedule's in-flight micro-batches, which step_memory.h counts. A CUDA
// device needs no such bound: a kernel holds no tensor, and the allocator hands a freed block
// to the same stream's later work in stream order, so there the host may run as far ahead as
// it likes.
//
//   ComputeLead lead(device);
//   for each compute action:  lead.before_issuing(); issue it; lead.issued(compute);
#pragma once
#include <utility>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/event.h"
#include "engine/stream.h"

namespace brigade::pipeline {

class ComputeLead {
 public:
  explicit ComputeLead(const Device& device) : bounded_(device.is_cpu()) {}

  // Before issuing compute action k: waits until action k - 2 has run (a CPU device only).
  void before_issuing() {
    if (!bounded_ || !two_back_.recorded()) return;
    try {
      two_back_.synchronize();
    } catch (const StreamError&) {
      // The stream failed: its later tasks are skipped (and hold nothing once skipped), and
      // the step's final synchronisation reports the failure from the action where it began.
    }
  }
  // After issuing a compute action on `compute`.
  void issued(const Stream& compute) {
    if (!bounded_) return;
    two_back_ = std::exchange(one_back_, Event());
    one_back_.record(compute);
  }

 private:
  bool bounded_;
  Event one_back_, two_back_;  // recorded after the last compute action issued, and the one before
};

}  // namespace brigade::pipeline

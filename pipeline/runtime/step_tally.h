// What the host learns of a step's micro-batches — each one's loss, correct count and label
// verdict — gathered on the last stage's device as the step runs, and read by the host with
// no wait of its own.
//
//   per micro-batch   the loss writes its row of the tally (Loss::tally: one launch on a GPU,
//                     a task on a CPU), right after the loss itself, in stream order;
//   end of the list   the last stage's device copies the whole tally into host memory (page-
//                     locked on a GPU, so the copy is asynchronous) on its compute stream;
//   after the drain   the step's one wait for that device (executor.cpp) covers the copy: the
//                     host reads the rows.
//
// The loss is summed on the host in micro-batch order, in double, from each micro-batch's float:
// the same value, to the bit, as reading each micro-batch's loss back on its own.
#pragma once
#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/micro_batch_tally.h"
#include "pipeline/runtime/device_streams.h"

namespace brigade::pipeline {

class StepTally {
 public:
  StepTally() = default;  // a process that does not run the last stage: nothing to tally
  // m micro-batches, tallied on the last stage's device: on `streams.compute`; behind a GPU,
  // the host copy belongs to `streams.check` (a CPU stream).
  StepTally(int microbatches, const DeviceStreams& streams);

  bool defined() const { return rows_.defined(); }
  // (micro-batches, kTallyFloats) on the last stage's device: what Loss::tally writes.
  const Tensor& rows() const { return rows_; }
  // Enqueues the copy of every row into host memory on `compute`, after the last tally.
  void copy_to_host(const Stream& compute);
  // Once the compute stream has passed copy_to_host (the host waited for it): row i.
  MicroBatchTally row(int i) const;
  // The same: the mini-batch's loss (micro-batches' losses summed in order, in double) and
  // correct count.
  double loss() const;
  int64_t correct() const;

 private:
  int microbatches_ = 0;
  Tensor rows_;  // (m, kTallyFloats) on the last stage's device
  Tensor host_;  // the same in host memory: page-locked behind a GPU, rows_ itself on a CPU
};

}  // namespace brigade::pipeline

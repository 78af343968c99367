// StagingArea: the next mini-batch is prepared on the devices while the current step runs
// (the role of the question's StagingArea).
//
// Two slots, used in turn. stage(epoch, k) enqueues, on a staging stream of its own, the
// work that fills the free slot with batch k of `epoch` (the Batcher decodes bytes to floats
// in [0, 1] in the shuffled order), and records the slot's ready events; nothing blocks the
// caller. take() hands out the oldest staged slot; the step makes its streams wait on the
// ready events (no host synchronisation) and, once it has enqueued everything that reads the
// slot, the runner calls release(slot, read) with the runtime's event after those reads
// (pipeline::Runtime::batch_read), and the next fill of that slot waits on it — the step may
// still be running on the devices when the host stages the batch after next. So the fill of step s+1 runs on the staging
// stream's worker while step s computes, and never overwrites data a step still reads.
//
// Where the batch goes is the runner's StagingLayout: images on the first stage's device,
// labels on the last stage's, cut into the step's micro-batches exactly as the runtime cuts a
// mini-batch (pipeline::microbatch_rows) — one tensor per micro-batch, so a pipelined step
// starts without a copy (pipeline::StagedBatch). Plain training is the layout with one device
// and one micro-batch.
//   CPU device   the tensors are host memory: the staging task writes the decoded rows into
//                them in place, no copy at all;
//   CUDA device  the task writes page-locked host tensors (cpu:0, Tensor::empty_pinned) and
//                copies each one up from the staging stream's worker: cudaMemcpyAsync on a
//                copy stream of the GPU, waited for there, not on the caller's thread.
// No allocation per step: the buffers are made once for a full batch; only an epoch's short
// last batch gets tensors of its own size (once per epoch).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/event.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "pipeline/runtime/runtime.h"
#include "tools/data/batches.h"

namespace brigade::train {

// Where a step reads its batch.
struct StagingLayout {
  Device first = Device::cpu(0);  // the first stage's device: the images
  Device last = Device::cpu(0);   // the last stage's device: the labels
  int microbatches = 1;
};

class StagingArea {
 public:
  struct Slot {
    int64_t epoch = -1, batch = -1, rows = 0;
    // inputs[i] (rows_i, C, H, W) on layout.first, labels[i] (rows_i) int32 bits on
    // layout.last, and their ready events (recorded on the staging stream after the fill).
    pipeline::StagedBatch staged;
    std::vector<Tensor> host_inputs, host_labels;  // a CUDA destination's host side, else empty
    Event consumed;  // after the step's reads of the slot (release()); never recorded: read
  };

  StagingArea(data::Batcher& batcher, StagingLayout layout);
  ~StagingArea();  // waits for the fills in flight (they write into the slots)

  void stage(int64_t epoch, int64_t k);  // the next slot: batch k of `epoch`
  Slot& take();                          // the oldest staged slot (one must be staged)
  bool has_staged() const { return staged_ > taken_; }
  void release(Slot& slot, const Event& read);  // `read`: after every read of the slot
  const StagingLayout& layout() const { return layout_; }

 private:
  void make_buffers(Slot& slot, int64_t rows);

  data::Batcher& batcher_;
  StagingLayout layout_;
  Stream stream_;  // the staging stream
  std::array<Slot, 2> slots_;
  int64_t staged_ = 0, taken_ = 0;  // counts: slot i % 2
};

}  // namespace brigade::train

// StagingArea: the next mini-batch is prepared on the devices while the current step runs
// (the role of the question's StagingArea).
//
// Two slots, used in turn. stage(epoch, k) enqueues, on a staging stream of its own (a CPU
// stream), the work that fills the free slot with batch k of `epoch` (the Batcher's rows in
// the shuffled order, as floats b / 255 in [0, 1]), and records the slot's ready events;
// nothing blocks the caller. take() hands out the oldest staged slot; the step makes its
// streams wait on the ready events (no host synchronisation) and, once it has enqueued
// everything that reads the slot, the runner calls release(slot, read) with the runtime's
// event after those reads (pipeline::Runtime::batch_read), and the next fill of that slot
// waits on it — the step may still be running on the devices when the host stages the batch
// after next. So the fill of step s+1 runs on the staging stream's worker while step s
// computes, and never overwrites data a step still reads.
//
// Where the batch goes is the runner's StagingLayout: images on the first stage's device,
// labels on the last stage's, cut into the step's micro-batches exactly as the runtime cuts a
// mini-batch (pipeline::microbatch_rows) — one tensor per micro-batch, so a pipelined step
// starts without a copy (pipeline::StagedBatch). Plain training is the layout with one device
// and one micro-batch.
//   CPU device   the tensors are host memory: the staging task writes the decoded rows into
//                them in place, no copy at all;
//   CUDA device  the images cross as the data set's own bytes, 1 per pixel where floats take
//                4 (every source the Batcher reads is bytes: Fashion-MNIST's files and the
//                synthetic set alike). The task gathers the rows' bytes into page-locked host
//                tensors (cpu:0, Tensor::empty_pinned, uint8), then, still on the staging
//                stream's worker, copies them up (cudaMemcpyAsync) and decodes them into the
//                float tensors (ops::decode_pixels: kernels/pixels.h's b / 255, the host
//                decode's bits) on a CUDA stream of the GPU kept for this (the decode stream),
//                and waits for that stream there, not on the caller's thread. The labels
//                (int32, tiny) are written to pinned tensors and copied up as they are.
// The ready events stay records on the staging stream after all of this: a step waits on
// them exactly as on a CPU destination's. bytes_copied() counts what crossed to GPUs.
// No allocation per step: the buffers are made once for a full batch; only an epoch's short
// last batch gets tensors of its own size (once per epoch).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
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
    // A CUDA destination's buffers, else empty: pixels[i] (rows_i, C, H, W) uint8 pinned on
    // cpu:0 and its copy on layout.first (the decode's input); labels[i] pinned on cpu:0.
    std::vector<Tensor> host_pixels, device_pixels, host_labels;
    Event consumed;  // after the step's reads of the slot (release()); never recorded: read
  };

  StagingArea(data::Batcher& batcher, StagingLayout layout);
  ~StagingArea();  // waits for the fills in flight (they write into the slots)

  void stage(int64_t epoch, int64_t k);  // the next slot: batch k of `epoch`
  Slot& take();                          // the oldest staged slot (one must be staged)
  bool has_staged() const { return staged_ > taken_; }
  void release(Slot& slot, const Event& read);  // `read`: after every read of the slot
  const StagingLayout& layout() const { return layout_; }
  // Bytes copied from the host to GPUs by the fills enqueued so far (images and labels): 0
  // when both destinations are CPU devices.
  int64_t bytes_copied() const { return bytes_copied_; }

 private:
  void make_buffers(Slot& slot, int64_t rows);

  data::Batcher& batcher_;
  StagingLayout layout_;
  Stream stream_;                       // the staging stream
  std::optional<Stream> decode_stream_;  // a CUDA layout.first's: the bytes' copy and decode
  std::array<Slot, 2> slots_;
  int64_t staged_ = 0, taken_ = 0;  // counts: slot i % 2
  int64_t bytes_copied_ = 0;
};

}  // namespace brigade::train

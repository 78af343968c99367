// StagingArea: the next mini-batch is prepared while the current step runs (the role of the
// question's StagingArea).
//
// Two slots, used in turn. stage(epoch, k) enqueues, on a staging stream of its own, the
// work that fills the free slot with batch k of `epoch` (the Batcher decodes bytes to floats
// in [0, 1] in the shuffled order), and records the slot's `ready` event; nothing blocks the
// caller. take() hands out the oldest staged slot; the consumer makes its stream wait on
// `ready` (no host synchronisation) and, once it has enqueued everything that reads the slot,
// calls release(slot, stream): the slot's `consumed` event is recorded there, and the next
// fill of that slot waits on it. So the fill of step s+1 runs on the staging stream's worker
// while step s computes, and never overwrites data a step still reads.
//
// Two destinations, chosen at construction:
//   Tensors  a CPU first stage: the slot holds tensors on that device, filled in place
//            (CPU device memory is host memory): no copy at all;
//   Host     a pipelined run: the slot holds the runtime's HostBatch (vectors); the runtime
//            copies each micro-batch onto the first stage's device itself.
// No allocation per step: the buffers are made once for a full batch; only an epoch's short
// last batch gets tensors of its own size (once per epoch), or shrinks the vectors in place.
#pragma once

#include <array>
#include <cstdint>

#include "engine/event.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "pipeline/runtime.h"
#include "tools/data/batches.h"

namespace brigade::train {

class StagingArea {
 public:
  enum class Destination { tensors, host };

  struct Slot {
    int64_t epoch = -1, batch = -1, rows = 0;
    Tensor images;                    // (rows, C, H, W): Destination::tensors
    Tensor labels;                    // (rows), int32 bits (kernels/ops.h)
    pipeline::HostBatch host;         // Destination::host
    Event ready;                      // recorded on the staging stream after the fill
    Event consumed;                   // recorded by release() on the consumer's stream
  };

  // `device`: the first stage's device, a CPU device when destination is tensors.
  StagingArea(data::Batcher& batcher, const Device& device, Destination destination);
  ~StagingArea();  // waits for the fills in flight (they write into the slots)

  void stage(int64_t epoch, int64_t k);  // the next slot: batch k of `epoch`
  Slot& take();                          // the oldest staged slot (one must be staged)
  bool has_staged() const { return staged_ > taken_; }
  void release(Slot& slot, const Stream& consumer);

  // Blocks until the staged slot is filled: a pipelined step takes host vectors, which its
  // host code reads directly. Throws the staging stream's error, if any.
  void wait_ready(Slot& slot) const { slot.ready.synchronize(); }

 private:
  void make_buffers(Slot& slot, int64_t rows);

  data::Batcher& batcher_;
  Destination destination_;
  Stream stream_;  // the staging stream
  std::array<Slot, 2> slots_;
  int64_t staged_ = 0, taken_ = 0;  // counts: slot i % 2
};

}  // namespace brigade::train

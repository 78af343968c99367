#include "tools/train/staging.h"

#include <span>

#include "engine/error.h"

namespace brigade::train {

StagingArea::StagingArea(data::Batcher& batcher, const Device& device, Destination destination)
    : batcher_(batcher),
      destination_(destination),
      // Host vectors are filled by a CPU worker: the first stage's own if it is a CPU device,
      // else cpu:0's (a GPU run's host side).
      stream_(Stream::create(device.is_cpu() ? device : Device::cpu(0))) {
  BRIGADE_CHECK(destination == Destination::host || device.is_cpu(),
                "StagingArea: in-place tensors need a CPU device, not " << device);
  const int64_t full = batcher_.options().batch_size;
  for (Slot& slot : slots_) make_buffers(slot, std::min(full, batcher_.dataset().count));
}

StagingArea::~StagingArea() {
  try {
    stream_.synchronize();
  } catch (...) {
    // The error was (or will be) reported by take()/wait_ready(); a destructor only waits.
  }
}

void StagingArea::make_buffers(Slot& slot, int64_t rows) {
  const data::Dataset& d = batcher_.dataset();
  slot.rows = rows;
  if (destination_ == Destination::tensors) {
    slot.images = Tensor::empty(Shape({rows, d.channels, d.height, d.width}), stream_);
    slot.labels = Tensor::empty(Shape({rows}), stream_);  // int32 bits in float32-sized cells
  } else {
    slot.host.x.resize(static_cast<size_t>(rows * d.sample_size()));
    slot.host.labels.resize(static_cast<size_t>(rows));
    slot.host.shape = Shape({rows, d.channels, d.height, d.width});
  }
}

void StagingArea::stage(int64_t epoch, int64_t k) {
  BRIGADE_CHECK(staged_ - taken_ < 2, "StagingArea: both slots are staged and not yet taken");
  Slot& slot = slots_[static_cast<size_t>(staged_ % 2)];
  // The fill overwrites the slot: it waits for the step that last read it.
  if (slot.consumed.recorded()) stream_.wait(slot.consumed);
  const int64_t rows = batcher_.batch_rows(k);
  if (rows != slot.rows) {
    // The epoch's short last batch, or the first full one after it. Tensors made on the
    // staging stream after the wait above; vectors only change size (capacity is kept) —
    // but they are host memory the previous fill may still write, so wait for it first.
    if (destination_ == Destination::host) stream_.synchronize();
    make_buffers(slot, rows);
  }
  slot.epoch = epoch;
  slot.batch = k;
  data::Batcher* batcher = &batcher_;
  const int64_t sample = batcher_.dataset().sample_size();
  if (destination_ == Destination::tensors) {
    const Tensor images = slot.images, labels = slot.labels;  // alive until the task has run
    stream_.enqueue([=] {
      batcher->fill(epoch, k, {images.data<float>(), static_cast<size_t>(rows * sample)},
                    {reinterpret_cast<int32_t*>(labels.data<float>()), static_cast<size_t>(rows)});
    });
  } else {
    pipeline::HostBatch* host = &slot.host;  // the slot outlives the task (see ~StagingArea)
    stream_.enqueue([=] { batcher->fill(epoch, k, host->x, host->labels); });
  }
  slot.ready.record(stream_);
  ++staged_;
}

StagingArea::Slot& StagingArea::take() {
  BRIGADE_CHECK(taken_ < staged_, "StagingArea: nothing is staged");
  return slots_[static_cast<size_t>(taken_++ % 2)];
}

void StagingArea::release(Slot& slot, const Stream& consumer) { slot.consumed.record(consumer); }

}  // namespace brigade::train

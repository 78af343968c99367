#include "tools/train/staging.h"

#include <span>

#include "engine/error.h"

namespace brigade::train {

StagingArea::StagingArea(data::Batcher& batcher, StagingLayout layout)
    : batcher_(batcher),
      layout_(layout),
      // A CPU worker decodes the rows: the first stage's own if it is a CPU device (its
      // tensors are then allocated for this stream), else cpu:0's (a GPU run's host side).
      stream_(Stream::create(layout.first.is_cpu() ? layout.first : Device::cpu(0))) {
  BRIGADE_CHECK(layout_.microbatches >= 1,
                "StagingArea: " << layout_.microbatches << " micro-batches");
  const int64_t full = batcher_.options().batch_size;
  for (Slot& slot : slots_) make_buffers(slot, std::min(full, batcher_.dataset().count));
}

StagingArea::~StagingArea() {
  try {
    stream_.synchronize();
  } catch (...) {
    // The error was (or will be) reported by the step that waited on the slot; a destructor
    // only waits.
  }
}

void StagingArea::make_buffers(Slot& slot, int64_t rows) {
  const data::Dataset& d = batcher_.dataset();
  slot.rows = rows;
  slot.staged.inputs.clear();
  slot.staged.labels.clear();
  slot.host_inputs.clear();
  slot.host_labels.clear();
  // Tensors on `device` that this stream writes: allocated for it when it is the device's
  // own stream, else marked as used by it (the allocator then waits for it before reuse).
  const auto for_stream = [&](const Shape& shape, const Device& device) {
    if (device == stream_.device()) return Tensor::empty(shape, stream_);
    const Tensor t = Tensor::empty(shape, device);
    t.record_stream(stream_);
    return t;
  };
  for (int64_t n : pipeline::microbatch_rows(rows, layout_.microbatches)) {
    const Shape images({n, d.channels, d.height, d.width}), labels({n});
    slot.staged.inputs.push_back(for_stream(images, layout_.first));
    slot.staged.labels.push_back(for_stream(labels, layout_.last));  // int32 bits
    // A GPU destination's host side is page-locked: its copy up is a direct, asynchronous DMA.
    if (!layout_.first.is_cpu()) slot.host_inputs.push_back(Tensor::empty_pinned(images, stream_));
    if (!layout_.last.is_cpu()) slot.host_labels.push_back(Tensor::empty_pinned(labels, stream_));
  }
  // One fill task writes both: one record serves as both events (copies are one event).
  slot.staged.labels_ready = slot.staged.inputs_ready;
}

void StagingArea::stage(int64_t epoch, int64_t k) {
  BRIGADE_CHECK(staged_ - taken_ < 2, "StagingArea: both slots are staged and not yet taken");
  Slot& slot = slots_[static_cast<size_t>(staged_ % 2)];
  // The fill overwrites the slot: it waits for the step that last read it.
  if (slot.consumed.recorded()) stream_.wait(slot.consumed);
  const int64_t rows = batcher_.batch_rows(k);
  // The epoch's short last batch, or the first full one after it: tensors of that size, made
  // after the wait above (the old ones stay alive until the steps that read them are done).
  if (rows != slot.rows) make_buffers(slot, rows);
  slot.epoch = epoch;
  slot.batch = k;
  // The task writes where the rows will be read: in place on a CPU device, else the host
  // side, copied up below. The tensors are captured by value: alive until the task has run.
  const std::vector<Tensor> images = layout_.first.is_cpu() ? slot.staged.inputs : slot.host_inputs;
  const std::vector<Tensor> labels = layout_.last.is_cpu() ? slot.staged.labels : slot.host_labels;
  data::Batcher* batcher = &batcher_;
  const int64_t sample = batcher_.dataset().sample_size();
  stream_.enqueue([=] {
    int64_t first = 0;
    for (size_t i = 0; i < images.size(); ++i) {
      const int64_t n = images[i].shape()[0];
      batcher->fill_rows(epoch, k, first, n,
                         {images[i].data<float>(), static_cast<size_t>(n * sample)},
                         {reinterpret_cast<int32_t*>(labels[i].data<float>()),
                          static_cast<size_t>(n)});
      first += n;
    }
  });
  for (size_t i = 0; i < slot.host_inputs.size(); ++i)
    copy_async(slot.staged.inputs[i], slot.host_inputs[i], stream_);
  for (size_t i = 0; i < slot.host_labels.size(); ++i)
    copy_async(slot.staged.labels[i], slot.host_labels[i], stream_);
  slot.staged.inputs_ready.record(stream_);  // labels_ready is the same event
  ++staged_;
}

StagingArea::Slot& StagingArea::take() {
  BRIGADE_CHECK(taken_ < staged_, "StagingArea: nothing is staged");
  return slots_[static_cast<size_t>(taken_++ % 2)];
}

void StagingArea::release(Slot& slot, const Event& read) { slot.consumed = read; }

}  // namespace brigade::train

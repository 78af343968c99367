#include "tools/train/staging.h"

#include <span>

#include "engine/error.h"
#include "kernels/ops.h"

namespace brigade::train {

StagingArea::StagingArea(data::Batcher& batcher, StagingLayout layout)
    : batcher_(batcher),
      layout_(layout),
      // A CPU worker writes the rows: the first stage's own if it is a CPU device (its
      // tensors are then allocated for this stream), else cpu:0's (a GPU run's host side,
      // whose bytes the decode stream copies up and decodes).
      stream_(Stream::create(layout.first.is_cpu() ? layout.first : Device::cpu(0))) {
  if (layout_.first.is_cuda()) decode_stream_ = Stream::create(layout_.first);
  BRIGADE_CHECK(layout_.microbatches >= 1,
                "StagingArea: " << layout_.microbatches << " micro-batches");
  const int64_t full = batcher_.options().batch_size;
  for (Slot& slot : slots_) make_buffers(slot, std::min(full, batcher_.dataset().count));
}

StagingArea::~StagingArea() {
  try {
    stream_.synchronize();  // its fills wait for their decodes: nothing is left on the GPU
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
  slot.host_pixels.clear();
  slot.device_pixels.clear();
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
    slot.staged.labels.push_back(for_stream(labels, layout_.last));  // int32 bits
    // A GPU destination's host side is page-locked: its copy up is a direct, asynchronous DMA.
    if (!layout_.last.is_cpu()) slot.host_labels.push_back(Tensor::empty_pinned(labels, stream_));
    if (!decode_stream_) {
      slot.staged.inputs.push_back(for_stream(images, layout_.first));
      continue;
    }
    // The decode stream writes the bytes' copy and the floats: both its own.
    slot.host_pixels.push_back(Tensor::empty_pinned(images, stream_, DType::uint8));
    slot.device_pixels.push_back(Tensor::empty(images, *decode_stream_, DType::uint8));
    slot.staged.inputs.push_back(Tensor::empty(images, *decode_stream_));
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
  // side, copied up. The tensors are captured by value: alive until the task has run.
  const std::vector<Tensor> labels = layout_.last.is_cpu() ? slot.staged.labels : slot.host_labels;
  const std::vector<Tensor> inputs = slot.staged.inputs, host_pixels = slot.host_pixels,
                            device_pixels = slot.device_pixels;
  const std::optional<Stream> decode = decode_stream_;
  data::Batcher* batcher = &batcher_;
  const int64_t sample = batcher_.dataset().sample_size();
  stream_.enqueue([=] {
    int64_t first = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = inputs[i].shape()[0];
      const std::span<int32_t> rows_labels(reinterpret_cast<int32_t*>(labels[i].data<float>()),
                                           static_cast<size_t>(n));
      if (decode)
        batcher->gather_rows(epoch, k, first, n,
                             {host_pixels[i].data<uint8_t>(), static_cast<size_t>(n * sample)},
                             rows_labels);
      else
        batcher->fill_rows(epoch, k, first, n,
                           {inputs[i].data<float>(), static_cast<size_t>(n * sample)}, rows_labels);
      first += n;
    }
    if (!decode) return;
    // The bytes up and their decode, ordered on the decode stream, then waited for here on
    // the worker: the ready events, recorded on the staging stream after this task, then
    // stand for the floats on the GPU.
    for (size_t i = 0; i < inputs.size(); ++i) {
      copy_async(device_pixels[i], host_pixels[i], *decode);
      ops::decode_pixels(device_pixels[i], inputs[i], *decode);
    }
    decode->synchronize();
  });
  for (size_t i = 0; i < slot.host_labels.size(); ++i)
    copy_async(slot.staged.labels[i], slot.host_labels[i], stream_);
  for (const Tensor& t : slot.host_pixels) bytes_copied_ += static_cast<int64_t>(t.nbytes());
  for (const Tensor& t : slot.host_labels) bytes_copied_ += static_cast<int64_t>(t.nbytes());
  slot.staged.inputs_ready.record(stream_);  // labels_ready is the same event
  ++staged_;
}

StagingArea::Slot& StagingArea::take() {
  BRIGADE_CHECK(taken_ < staged_, "StagingArea: nothing is staged");
  return slots_[static_cast<size_t>(taken_++ % 2)];
}

void StagingArea::release(Slot& slot, const Event& read) { slot.consumed = read; }

}  // namespace brigade::train

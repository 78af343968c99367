// The order of an epoch, and its batches written into the caller's buffers.
//
// Order. With shuffling, epoch e visits the N samples in a permutation that is a pure function
// of (seed, e, N): a Fisher-Yates shuffle of 0..N-1 from the back, whose step i (i = N-1 down to
// 1) swaps positions i and
//   j = x mod (i + 1),   x = v[0] << 32 | v[1]   of
//   philox4x32_10(counter = {i low, i high, e, kShuffleStream}, key = {seed low, seed high})
// (engine/philox.h). The modulo's bias is below (i + 1) / 2^64: under 2^-40 for any N below
// 2^24, never measurable. No generator state is carried from epoch to epoch, so a resumed run
// rebuilds the order of any epoch from its number alone. Without shuffling (--no-shuffle),
// every epoch is file order.
//
// Batches. Batch k of an epoch holds the samples order[k B, min((k + 1) B, N)): B of them,
// except the last batch, which holds the N mod B left over; with drop_last that short batch is
// dropped instead, so every batch has exactly B rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tools/data/dataset.h"

namespace brigade::data {

// The tag of the shuffle's Philox stream (the counter's last word), so that it never draws the
// words another user of the same seed draws (dropout counts steps there, synthetic data uses
// 0x5EED0DA7).
inline constexpr uint32_t kShuffleStream = 0x5A0FF1E5u;

// Writes the order of `epoch` into `order`, a permutation of 0..order.size()-1: file order
// when `shuffle` is false. 0 <= epoch < 2^32.
void epoch_order(uint64_t seed, int64_t epoch, bool shuffle, std::span<int64_t> order);

struct BatchOptions {
  int64_t batch_size = 128;  // B
  bool shuffle = true;       // false: file order every epoch (--no-shuffle)
  bool drop_last = false;    // true: drop the last batch when it has fewer than B rows
  uint64_t seed = 0;
};

// Hands out the batches of a data set, epoch after epoch, into buffers the caller owns: the
// trainer fills the next batch into a staging buffer while the current step runs. No
// allocation after construction (the order of the current epoch is kept and rebuilt in place
// when the epoch changes). One Batcher per thread: fill() is not thread-safe.
class Batcher {
 public:
  Batcher(const Dataset& data, BatchOptions options);  // keeps a reference to `data`
  Batcher(Dataset&&, BatchOptions) = delete;           // ... so never to a temporary

  int64_t batches_per_epoch() const;
  int64_t batch_rows(int64_t k) const;  // rows in batch k: B, or fewer for the last
  const Dataset& dataset() const { return data_; }
  const BatchOptions& options() const { return options_; }

  // Writes batch k of `epoch`: images (rows, C, H, W) as float32 pixel / 255 in [0, 1] and
  // labels (rows), rows = batch_rows(k). The spans must hold at least that much. Returns rows.
  int64_t fill(int64_t epoch, int64_t k, std::span<float> images, std::span<int32_t> labels);
  // Rows [first, first + count) of batch k only, into spans of at least `count` rows: a
  // pipelined step's micro-batches are written in place, each into a tensor of its own.
  void fill_rows(int64_t epoch, int64_t k, int64_t first, int64_t count, std::span<float> images,
                 std::span<int32_t> labels);
  // The same rows as the data set's own bytes (rows, C, H, W) in 0..255, undecoded: a GPU is
  // sent these (a quarter of the floats' bytes) and decodes them there with the same function
  // (kernels/pixels.h, ops::decode_pixels), so the floats it reads are fill_rows' bit for bit.
  void gather_rows(int64_t epoch, int64_t k, int64_t first, int64_t count,
                   std::span<uint8_t> pixels, std::span<int32_t> labels);

  // The order of `epoch` (see epoch_order), rebuilt if it is not the one kept.
  std::span<const int64_t> order(int64_t epoch);

 private:
  // The samples of rows [first, first + count) of batch k, their labels written, after
  // checking that the buffers hold `count` rows (`pixels` elements of `unit`, "floats" or
  // "bytes", for the message).
  std::span<const int64_t> rows_of(int64_t epoch, int64_t k, int64_t first, int64_t count,
                                   size_t pixels, std::span<int32_t> labels, const char* unit);

  const Dataset& data_;
  BatchOptions options_;
  std::vector<int64_t> order_;  // (N): the order of epoch order_epoch_
  int64_t order_epoch_ = -1;
};

}  // namespace brigade::data

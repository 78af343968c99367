#include "tools/data/batches.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "engine/error.h"
#include "engine/philox.h"
#include "kernels/pixels.h"

namespace brigade::data {

void epoch_order(uint64_t seed, int64_t epoch, bool shuffle, std::span<int64_t> order) {
  BRIGADE_CHECK(epoch >= 0 && epoch <= int64_t{0xFFFFFFFF},
                "epoch " << epoch << " is outside 0..2^32-1");
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t e = static_cast<uint32_t>(epoch);
  for (uint64_t i = order.size() > 0 ? order.size() - 1 : 0; i > 0; --i) {
    const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), e,
                                       kShuffleStream, key0, key1);
    const uint64_t x = (uint64_t{r.v[0]} << 32) | r.v[1];
    std::swap(order[i], order[x % (i + 1)]);
  }
}

Batcher::Batcher(const Dataset& data, BatchOptions options)
    : data_(data), options_(options), order_(static_cast<size_t>(data.count)) {
  BRIGADE_CHECK(static_cast<int64_t>(data.pixels.size()) == data.count * data.sample_size() &&
                    static_cast<int64_t>(data.labels.size()) == data.count,
                "data set '" << data.name << "' is inconsistent: " << data.count << " samples of "
                             << data.sample_size() << " pixels, but " << data.pixels.size()
                             << " pixels and " << data.labels.size() << " labels");
  BRIGADE_CHECK(options.batch_size > 0,
                "batch size must be positive, got " << options.batch_size);
  BRIGADE_CHECK(!options.drop_last || options.batch_size <= data.count,
                "batch size " << options.batch_size << " is larger than the " << data.count
                              << " samples of '" << data.name
                              << "', and dropping the last short batch leaves no batch at all");
}

int64_t Batcher::batches_per_epoch() const {
  const int64_t b = options_.batch_size;
  return options_.drop_last ? data_.count / b : (data_.count + b - 1) / b;
}

int64_t Batcher::batch_rows(int64_t k) const {
  BRIGADE_CHECK(k >= 0 && k < batches_per_epoch(),
                "batch " << k << " is outside 0.." << batches_per_epoch() - 1 << " of '"
                         << data_.name << "' (" << data_.count << " samples in batches of "
                         << options_.batch_size << ")");
  return std::min(options_.batch_size, data_.count - k * options_.batch_size);
}

std::span<const int64_t> Batcher::order(int64_t epoch) {
  if (epoch != order_epoch_) {
    epoch_order(options_.seed, epoch, options_.shuffle, order_);
    order_epoch_ = epoch;
  }
  return order_;
}

int64_t Batcher::fill(int64_t epoch, int64_t k, std::span<float> images,
                      std::span<int32_t> labels) {
  const int64_t rows = batch_rows(k);
  fill_rows(epoch, k, 0, rows, images, labels);
  return rows;
}

std::span<const int64_t> Batcher::rows_of(int64_t epoch, int64_t k, int64_t first, int64_t count,
                                          size_t pixels, std::span<int32_t> labels,
                                          const char* unit) {
  const int64_t rows = batch_rows(k);
  const int64_t sample = data_.sample_size();  // C * H * W
  BRIGADE_CHECK(first >= 0 && count >= 0 && first + count <= rows,
                "rows [" << first << ", " << first + count << ") of batch " << k << " of '"
                         << data_.name << "', which has " << rows << " rows");
  BRIGADE_CHECK(static_cast<int64_t>(pixels) >= count * sample &&
                    static_cast<int64_t>(labels.size()) >= count,
                "batch " << k << " of '" << data_.name << "': " << count << " rows of ("
                         << data_.channels << ", " << data_.height << ", " << data_.width
                         << ") need " << count * sample << " " << unit << " and " << count
                         << " labels, the buffers hold " << pixels << " and " << labels.size());
  const std::span<const int64_t> samples = order(epoch).subspan(
      static_cast<size_t>(k * options_.batch_size + first), static_cast<size_t>(count));
  for (size_t r = 0; r < samples.size(); ++r)
    labels[r] = data_.labels[static_cast<size_t>(samples[r])];
  return samples;
}

void Batcher::fill_rows(int64_t epoch, int64_t k, int64_t first, int64_t count,
                        std::span<float> images, std::span<int32_t> labels) {
  const std::span<const int64_t> samples =
      rows_of(epoch, k, first, count, images.size(), labels, "floats");
  const int64_t sample = data_.sample_size();
  for (int64_t r = 0; r < count; ++r) {
    const int64_t n = samples[static_cast<size_t>(r)];
    const uint8_t* src = data_.pixels.data() + n * sample;  // (C, H, W) bytes
    float* dst = images.data() + r * sample;                // (C, H, W) floats
    for (int64_t p = 0; p < sample; ++p) dst[p] = pixel_value(src[p]);
  }
}

void Batcher::gather_rows(int64_t epoch, int64_t k, int64_t first, int64_t count,
                          std::span<uint8_t> pixels, std::span<int32_t> labels) {
  const std::span<const int64_t> samples =
      rows_of(epoch, k, first, count, pixels.size(), labels, "bytes");
  const int64_t sample = data_.sample_size();
  for (int64_t r = 0; r < count; ++r)  // (C, H, W) bytes each
    std::memcpy(pixels.data() + r * sample,
                data_.pixels.data() + samples[static_cast<size_t>(r)] * sample,
                static_cast<size_t>(sample));
}

}  // namespace brigade::data

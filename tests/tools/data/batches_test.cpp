// Epoch orders and batches: permutations reproducible from (seed, epoch), the documented
// Fisher-Yates formula, uniformity, file order without shuffling, and the last short batch.
#include "tools/data/batches.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/philox.h"
#include "tests/support/error_text.h"

using brigade::data::BatchOptions;
using brigade::data::Batcher;
using brigade::data::Dataset;
using brigade::data::epoch_order;
using brigade::data::make_synthetic;
using brigade::data::Split;
using brigade::testing::error_of;

namespace {

std::vector<int64_t> order_of(uint64_t seed, int64_t epoch, int64_t n, bool shuffle = true) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  epoch_order(seed, epoch, shuffle, order);
  return order;
}

bool is_permutation_of_iota(std::vector<int64_t> order) {
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

TEST_CASE("an epoch's order is a permutation, a pure function of (seed, epoch)") {
  for (int64_t e = 0; e < 4; ++e) CHECK(is_permutation_of_iota(order_of(42, e, 1000)));
  CHECK(order_of(42, 3, 1000) == order_of(42, 3, 1000));
  CHECK(order_of(42, 3, 1000) != order_of(42, 4, 1000));
  CHECK(order_of(42, 3, 1000) != order_of(43, 3, 1000));
  CHECK(order_of(42, 3, 1000, /*shuffle=*/false) == order_of(0, 0, 1000, false));
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(order_of(42, 3, 1000, /*shuffle=*/false) == iota);
  CHECK(order_of(42, 0, 0).empty());
  CHECK(order_of(42, 0, 1) == std::vector<int64_t>{0});
  CHECK(error_of([] { order_of(1, -1, 5); }) == "epoch -1 is outside 0..2^32-1");
}

TEST_CASE("the shuffle is the Fisher-Yates of batches.h's comment, written out by hand") {
  const uint64_t seed = 0x0123456789ABCDEFull;
  const uint32_t epoch = 5;
  std::vector<int64_t> expected = {0, 1, 2, 3, 4, 5, 6};
  for (uint32_t i = 6; i >= 1; --i) {
    const brigade::Philox4x32 r =
        brigade::philox4x32_10(i, 0, epoch, 0x5A0FF1E5u, 0x89ABCDEFu, 0x01234567u);
    const uint64_t x = (uint64_t{r.v[0]} << 32) | r.v[1];
    std::swap(expected[i], expected[x % (i + 1)]);
  }
  CHECK(order_of(seed, epoch, 7) == expected);
}

// With 3 samples and 6000 seeds, each of the 6 orders should appear 1000 times; the standard
// deviation is sqrt(6000 * 1/6 * 5/6) = 28.9, so +-150 is more than 5 of them (and the seeds
// are fixed: this is deterministic, never flaky).
TEST_CASE("every order of 3 samples is equally likely") {
  std::map<std::vector<int64_t>, int> seen;
  for (uint64_t seed = 0; seed < 6000; ++seed) ++seen[order_of(seed, 1, 3)];
  CHECK(seen.size() == 6);
  for (const auto& [order, times] : seen) CHECK(std::abs(times - 1000) < 150);
}

TEST_CASE("batches: B rows each, the last one short or dropped, contents from the order") {
  const Dataset data = make_synthetic(Split::train, 3, 10);
  const int64_t sample = data.sample_size();  // 784

  SUBCASE("the last batch holds what is left") {
    Batcher batcher(data, BatchOptions{.batch_size = 4, .shuffle = true, .drop_last = false, .seed = 9});
    CHECK(batcher.batches_per_epoch() == 3);
    CHECK(batcher.batch_rows(0) == 4);
    CHECK(batcher.batch_rows(1) == 4);
    CHECK(batcher.batch_rows(2) == 2);
    std::vector<float> images(4 * sample);  // (4, 1, 28, 28)
    std::vector<int32_t> labels(4);         // (4)
    for (int64_t epoch : {2, 0, 2}) {  // going back to an epoch rebuilds the same order
      const std::vector<int64_t> order = order_of(9, epoch, 10);
      std::vector<int64_t> visited;
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t rows = batcher.fill(epoch, k, images, labels);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t n = order[k * 4 + r];
          visited.push_back(n);
          CHECK(labels[r] == data.labels[n]);
          for (int64_t p = 0; p < sample; ++p)
            REQUIRE(images[r * sample + p] == float(data.pixels[n * sample + p]) / 255.0f);
        }
      }
      CHECK(is_permutation_of_iota(visited));  // every sample once per epoch
    }
    CHECK(error_of([&] { batcher.batch_rows(3); }) ==
          "batch 3 is outside 0..2 of 'synthetic train' (10 samples in batches of 4)");
    std::vector<float> small(3 * sample);
    CHECK(error_of([&] { batcher.fill(0, 0, small, labels); }) ==
          "batch 0 of 'synthetic train': 4 rows of (1, 28, 28) need 3136 floats and 4 "
          "labels, the buffers hold 2352 and 4");
    CHECK(batcher.fill(0, 2, small, labels) == 2);  // the short batch fits a smaller buffer
    // Micro-batches in place: rows [1, 4) then [0, 1) of batch 1 are the full fill's rows.
    REQUIRE(batcher.fill(2, 1, images, labels) == 4);
    std::vector<float> part(3 * sample);
    std::vector<int32_t> part_labels(3);
    batcher.fill_rows(2, 1, 1, 3, part, part_labels);
    CHECK(std::vector<float>(images.begin() + sample, images.end()) == part);
    CHECK(std::vector<int32_t>(labels.begin() + 1, labels.end()) == part_labels);
    batcher.fill_rows(2, 1, 0, 1, part, part_labels);
    CHECK(std::vector<float>(images.begin(), images.begin() + sample) ==
          std::vector<float>(part.begin(), part.begin() + sample));
    CHECK(part_labels[0] == labels[0]);
    CHECK(error_of([&] { batcher.fill_rows(0, 2, 1, 2, part, part_labels); }) ==
          "rows [1, 3) of batch 2 of 'synthetic train', which has 2 rows");
  }
  SUBCASE("drop_last drops the short batch") {
    Batcher batcher(data, BatchOptions{.batch_size = 4, .shuffle = true, .drop_last = true, .seed = 9});
    CHECK(batcher.batches_per_epoch() == 2);
    CHECK(batcher.batch_rows(1) == 4);
    CHECK(error_of([] {
            const Dataset d = make_synthetic(Split::train, 3, 10);
            Batcher b(d, BatchOptions{.batch_size = 11, .shuffle = true, .drop_last = true, .seed = 0});
          }) == "batch size 11 is larger than the 10 samples of 'synthetic train', and dropping "
                "the last short batch leaves no batch at all");
  }
  SUBCASE("no shuffle: file order, every epoch; pixels in [0, 1]") {
    Batcher batcher(data, BatchOptions{.batch_size = 10, .shuffle = false, .drop_last = false, .seed = 9});
    std::vector<float> images(10 * sample);
    std::vector<int32_t> labels(10);
    for (int64_t epoch : {0, 7}) {
      batcher.fill(epoch, 0, images, labels);
      CHECK(labels == data.labels);
      CHECK(images.front() == float(data.pixels.front()) / 255.0f);
      CHECK(images.back() == float(data.pixels.back()) / 255.0f);
    }
    CHECK(*std::min_element(images.begin(), images.end()) >= 0.0f);
    CHECK(*std::max_element(images.begin(), images.end()) <= 1.0f);
    CHECK(float(uint8_t{255}) / 255.0f == 1.0f);  // the brightest pixel is exactly 1
  }
  CHECK(error_of([&] { Batcher b(data, BatchOptions{.batch_size = 0}); }) ==
        "batch size must be positive, got 0");
}

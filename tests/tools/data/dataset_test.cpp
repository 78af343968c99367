// Data sets: Fashion-MNIST from a directory (the real files when installed, hand-made ones for
// the error cases) and the synthetic stand-in.
#include "tools/data/dataset.h"

#include <doctest/doctest.h>

#include <array>
#include <filesystem>
#include <numeric>
#include <string>
#include <utility>

#include "engine/error.h"
#include "tests/tools/data/idx_files.h"
#include "tests/support/error_text.h"

using brigade::data::Dataset;
using brigade::data::kFashionMnistDir;
using brigade::data::load_dataset;
using brigade::data::load_fashion_mnist;
using brigade::data::make_synthetic;
using brigade::data::Split;
using brigade::testing::error_of;
using brigade::testing::Bytes;
using brigade::testing::gzip;
using brigade::testing::idx_bytes;
using brigade::testing::TempDir;

namespace {

uint64_t pixel_sum(const Dataset& d, int64_t first, int64_t count) {
  const auto begin = d.pixels.begin() + first * d.sample_size();
  return std::accumulate(begin, begin + count * d.sample_size(), uint64_t{0});
}

}  // namespace

// The reference numbers come from the files themselves, read another way, e.g.
//   zcat train-labels-idx1-ubyte.gz | od -An -v -tu1 -j8 | head -c 30        (9 0 0 3 0 2 ...)
//   zcat train-images-idx3-ubyte.gz | od -An -v -tu1 -j16 |
//     awk '{for (i = 1; i <= NF; i++) s += $i} END {printf "%.0f\n", s}'   (3431114169)
TEST_CASE("the real Fashion-MNIST files load, when the package is installed") {
  if (!std::filesystem::exists(kFashionMnistDir)) {
    MESSAGE("skipped: " << kFashionMnistDir << " is absent (apt-get install dataset-fashion-mnist)");
    return;
  }
  const Dataset train = load_fashion_mnist(kFashionMnistDir, Split::train);
  const Dataset test = load_fashion_mnist(kFashionMnistDir, Split::test);
  CHECK(train.count == 60'000);
  CHECK(test.count == 10'000);
  for (const Dataset* d : {&train, &test}) {
    CHECK(d->channels == 1);
    CHECK(d->height == 28);
    CHECK(d->width == 28);
    CHECK(d->pixels.size() == static_cast<size_t>(d->count * 784));
    CHECK(d->labels.size() == static_cast<size_t>(d->count));
  }
  // The first training image is an ankle boot (class 9); then T-shirt, T-shirt, dress...
  CHECK(std::vector<int32_t>(train.labels.begin(), train.labels.begin() + 6) ==
        std::vector<int32_t>{9, 0, 0, 3, 0, 2});
  CHECK(std::vector<int32_t>(test.labels.begin(), test.labels.begin() + 6) ==
        std::vector<int32_t>{9, 2, 1, 1, 6, 1});
  std::array<int64_t, 10> per_class{};
  for (int32_t l : train.labels) {
    REQUIRE((l >= 0 && l <= 9));
    ++per_class[static_cast<size_t>(l)];
  }
  for (int64_t n : per_class) CHECK(n == 6'000);  // Fashion-MNIST is balanced
  CHECK(std::accumulate(test.labels.begin(), test.labels.end(), int64_t{0}) == 45'000);
  // Checksums of the pixels, from zcat | od | awk (see above).
  CHECK(pixel_sum(train, 0, train.count) == 3'431'114'169u);
  CHECK(pixel_sum(test, 0, test.count) == 573'469'082u);
  CHECK(pixel_sum(train, 0, 1) == 76'247u);
  CHECK(pixel_sum(test, test.count - 1, 1) == 24'390u);
}

TEST_CASE("a directory without Fashion-MNIST says how to get it") {
  TempDir dir;
  CHECK(error_of([&] { load_fashion_mnist(dir.path(), Split::test); }) ==
        "Fashion-MNIST not found: no t10k-images-idx3-ubyte.gz (or t10k-images-idx3-ubyte) in '" +
            dir.path() + "'. Install Debian's package with `apt-get install "
            "dataset-fashion-mnist` (or run tools/setup.sh), or point --data-dir at a directory "
            "holding the four IDX files.");
}

TEST_CASE("hand-made Fashion-MNIST files: read, and each inconsistency refused") {
  TempDir dir;
  const Bytes pixels(3 * 28 * 28, 255);  // (3, 28, 28)
  SUBCASE("plain files without .gz are found and read; pixels and labels as stored") {
    dir.write("t10k-images-idx3-ubyte", idx_bytes({3, 28, 28}, pixels));
    dir.write("t10k-labels-idx1-ubyte", idx_bytes({3}, {4, 0, 9}));
    const Dataset d = load_fashion_mnist(dir.path(), Split::test);
    CHECK(d.name == "fashion-mnist test");
    CHECK(d.count == 3);
    CHECK(d.labels == std::vector<int32_t>{4, 0, 9});
    CHECK(d.pixels == pixels);
  }
  SUBCASE("mismatched image and label counts") {
    const std::string images = dir.write("train-images-idx3-ubyte.gz", gzip(idx_bytes({3, 28, 28}, pixels)));
    const std::string labels = dir.write("train-labels-idx1-ubyte.gz", gzip(idx_bytes({2}, {1, 2})));
    CHECK(error_of([&] { load_fashion_mnist(dir.path(), Split::train); }) ==
          "Fashion-MNIST in '" + dir.path() + "': '" + images + "' holds 3 images but '" +
              labels + "' holds 2 labels");
  }
  SUBCASE("images that are not 28 x 28") {
    const std::string images = dir.write("train-images-idx3-ubyte.gz", gzip(idx_bytes({1, 2, 2}, {1, 2, 3, 4})));
    dir.write("train-labels-idx1-ubyte.gz", gzip(idx_bytes({1}, {1})));
    CHECK(error_of([&] { load_fashion_mnist(dir.path(), Split::train); }) ==
          "IDX file '" + images + "': images are 2 x 2, Fashion-MNIST's are 28 x 28");
  }
  SUBCASE("a label outside 0..9") {
    dir.write("train-images-idx3-ubyte.gz", gzip(idx_bytes({3, 28, 28}, pixels)));
    const std::string labels = dir.write("train-labels-idx1-ubyte.gz", gzip(idx_bytes({3}, {1, 10, 2})));
    CHECK(error_of([&] { load_fashion_mnist(dir.path(), Split::train); }) ==
          "IDX file '" + labels + "': label 10 of sample 1 is outside 0..9");
  }
}

TEST_CASE("the synthetic data set: a pure function of (seed, split), and learnable") {
  const Dataset a = make_synthetic(Split::train, 7, 2000);
  CHECK(a.count == 2000);
  CHECK(a.pixels.size() == 2000u * 784u);
  CHECK(a.pixels == make_synthetic(Split::train, 7, 2000).pixels);
  CHECK(a.labels == make_synthetic(Split::train, 7, 2000).labels);
  CHECK(a.pixels != make_synthetic(Split::train, 8, 2000).pixels);
  CHECK(a.labels != make_synthetic(Split::test, 7, 2000).labels);
  // A prefix of a larger set is the smaller set: sample i depends on i alone.
  CHECK(make_synthetic(Split::train, 7, 10).pixels ==
        std::vector<uint8_t>(a.pixels.begin(), a.pixels.begin() + 10 * 784));

  std::array<int64_t, 10> per_class{};
  for (int32_t l : a.labels) {
    REQUIRE((l >= 0 && l <= 9));
    ++per_class[static_cast<size_t>(l)];
  }
  for (int64_t n : per_class) CHECK(n > 100);  // about 200 each

  // Learnable: a nearest-class-mean classifier fitted on the train split labels the test split.
  std::vector<double> mean(10 * 784, 0.0);  // (classes, 784)
  for (int64_t i = 0; i < a.count; ++i)
    for (int64_t p = 0; p < 784; ++p)
      mean[a.labels[i] * 784 + p] += a.pixels[i * 784 + p] / double(per_class[a.labels[i]]);
  const Dataset t = make_synthetic(Split::test, 7, 500);
  int64_t correct = 0;
  for (int64_t i = 0; i < t.count; ++i) {
    int best = 0;
    double best_distance = 1e300;
    for (int c = 0; c < 10; ++c) {
      double distance = 0;
      for (int64_t p = 0; p < 784; ++p) {
        const double d = t.pixels[i * 784 + p] - mean[c * 784 + p];
        distance += d * d;
      }
      if (distance < best_distance) best_distance = distance, best = c;
    }
    correct += best == t.labels[i];
  }
  CHECK(correct >= 495);  // the patches are 155 grey levels above noise of range 100
  CHECK(error_of([] { make_synthetic(Split::train, 1, 0); }) ==
        "synthetic data set: count must be in 1..2^31, got 0");
}

TEST_CASE("load_dataset picks the data set by its --data name") {
  TempDir dir;
  dir.write("t10k-images-idx3-ubyte.gz", gzip(idx_bytes({2, 28, 28}, Bytes(2 * 784, 7))));
  dir.write("t10k-labels-idx1-ubyte.gz", gzip(idx_bytes({2}, {5, 6})));
  const Dataset files = load_dataset("fashion-mnist", dir.path(), Split::test, 1);
  CHECK(files.labels == std::vector<int32_t>{5, 6});
  const Dataset synthetic = load_dataset("synthetic", dir.path(), Split::test, 1);
  CHECK(synthetic.count == 10'000);
  CHECK(synthetic.labels == make_synthetic(Split::test, 1, 10'000).labels);
  CHECK(error_of([&] { load_dataset("mnist", dir.path(), Split::test, 1); }) ==
        "unknown data set 'mnist': expected fashion-mnist or synthetic");
}

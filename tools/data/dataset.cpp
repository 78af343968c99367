#include "tools/data/dataset.h"

#include <filesystem>

#include "engine/error.h"
#include "engine/philox.h"
#include "tools/data/idx.h"

namespace brigade::data {
namespace {

constexpr int64_t kSide = 28;
constexpr int64_t kClasses = 10;

// The file `stem`.gz, or `stem` itself, in `dir`; a message saying how to get them otherwise.
std::string find_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;  // an unreadable directory reads as "not there"
  for (const std::string& name : {stem + ".gz", stem}) {
    const fs::path path = fs::path(dir) / name;
    if (fs::exists(path, ec)) return path.string();
  }
  throw Error("Fashion-MNIST not found: no " + stem + ".gz (or " + stem + ") in '" + dir +
              "'. Install Debian's package with `apt-get install dataset-fashion-mnist` (or run "
              "tools/setup.sh), or point --data-dir at a directory holding the four IDX files.");
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx_file(images_path, 3);  // (N, 28, 28)
  IdxArray labels = read_idx_file(labels_path, 1);  // (N)

  BRIGADE_CHECK(images.dims[1] == kSide && images.dims[2] == kSide,
                "IDX file '" << images_path << "': images are " << images.dims[1] << " x "
                             << images.dims[2] << ", Fashion-MNIST's are 28 x 28");
  BRIGADE_CHECK(images.dims[0] == labels.dims[0],
                "Fashion-MNIST in '" << dir << "': '" << images_path << "' holds "
                                     << images.dims[0] << " images but '" << labels_path
                                     << "' holds " << labels.dims[0] << " labels");
  BRIGADE_CHECK(images.dims[0] > 0, "IDX file '" << images_path << "' holds no images");

  Dataset out;
  out.name = std::string("fashion-mnist ") + (split == Split::train ? "train" : "test");
  out.count = images.dims[0];
  out.classes = kClasses;
  out.pixels = std::move(images.data);
  out.labels.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    BRIGADE_CHECK(labels.data[i] < kClasses, "IDX file '" << labels_path << "': label "
                                                          << int{labels.data[i]} << " of sample "
                                                          << i << " is outside 0..9");
    out.labels[i] = labels.data[i];
  }
  return out;
}

Dataset make_synthetic(Split split, uint64_t seed, int64_t count) {
  BRIGADE_CHECK(count > 0 && count <= (int64_t{1} << 31),
                "synthetic data set: count must be in 1..2^31, got " << count);
  // Philox streams are told apart by the counter's last word: this one is the synthetic data
  // set's (dropout's counter there is a step number, batches.cpp's is another tag).
  constexpr uint32_t kStream = 0x5EED0DA7u;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t which = split == Split::train ? 0 : 1;
  constexpr int64_t kPixels = kSide * kSide;
  // Class c lights rows [3 + 13 (c / 5), +9) x cols [2 + 5 (c % 5), +4): a 5-by-2 grid of patches.
  constexpr int64_t kPatchRows = 9, kPatchCols = 4;

  Dataset out;
  out.name = std::string("synthetic ") + (split == Split::train ? "train" : "test");
  out.count = count;
  out.classes = kClasses;
  out.pixels.resize(static_cast<size_t>(count * kPixels));  // (N, 1, 28, 28)
  out.labels.resize(static_cast<size_t>(count));           // (N)
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t sample = static_cast<uint32_t>(i);
    const int32_t label = static_cast<int32_t>(
        philox4x32_10(0xFFFFFFFFu, sample, which, kStream, key0, key1).v[0] % kClasses);
    out.labels[i] = label;
    const int64_t top = 3 + 13 * (label / 5), left = 2 + 5 * (label % 5);
    uint8_t* image = out.pixels.data() + i * kPixels;  // (28, 28)
    for (int64_t p = 0; p < kPixels; p += 4) {
      const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(p / 4), sample, which, kStream,
                                         key0, key1);
      for (int64_t q = 0; q < 4; ++q) {
        const int64_t y = (p + q) / kSide, x = (p + q) % kSide;
        const bool lit = y >= top && y < top + kPatchRows && x >= left && x < left + kPatchCols;
        image[p + q] = static_cast<uint8_t>((r.v[q] >> 8) % 100 + (lit ? 155 : 0));
      }
    }
  }
  return out;
}

Dataset load_dataset(const std::string& which, const std::string& dir, Split split,
                     uint64_t seed) {
  if (which == "fashion-mnist") return load_fashion_mnist(dir, split);
  if (which == "synthetic") return make_synthetic(split, seed, split == Split::train ? 60'000 : 10'000);
  throw Error("unknown data set '" + which + "': expected fashion-mnist or synthetic");
}

}  // namespace brigade::data

// Data sets of 28x28 grey images in 10 classes: Fashion-MNIST from its IDX files, or a
// synthetic stand-in of the same shapes generated from a seed.
//
// Pixels are kept as the bytes the files hold (0..255), which is 4x smaller than floats (47 MB
// instead of 188 MB for the training set); the batcher (batches.h) hands them out as float32
// in [0, 1], pixel / 255, the scaling of torchvision's ToTensor. Labels are int32 class
// indices in [0, classes), what the loss kernels take (kernels/labels.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::data {

enum class Split { train, test };

struct Dataset {
  std::string name;             // "fashion-mnist train", for messages and reports
  int64_t count = 0;            // N
  int64_t channels = 1;         // C
  int64_t height = 28;          // H
  int64_t width = 28;           // W
  int64_t classes = 10;
  std::vector<uint8_t> pixels;  // (N, C, H, W), 0..255
  std::vector<int32_t> labels;  // (N), 0..classes-1

  int64_t sample_size() const { return channels * height * width; }  // C * H * W
};

// Where Debian's dataset-fashion-mnist package puts the four gzip'd IDX files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads the train (60,000 images) or test (10,000) split from `dir`, which holds
// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz (or the same names without .gz, plain or compressed: the
// content decides). Throws brigade::Error when a file is missing (saying how to install the
// package or point --data-dir elsewhere), malformed (idx.h), not 28x28, when the image and
// label counts differ, or when a label is outside 0..9.
Dataset load_fashion_mnist(const std::string& dir, Split split);

// A learnable stand-in for tests and quick runs: `count` samples of shape (1, 28, 28), labels
// 0..9. Sample i of class c is noise in 0..99 plus 155 on a 9-row, 4-column patch whose place
// on a 5-by-2 grid is c, so even a linear model separates the classes. A pure function of
// (seed, split, i): Philox4x32-10 (engine/philox.h) draws the label and the noise.
Dataset make_synthetic(Split split, uint64_t seed, int64_t count);

// The trainer's --data choice: "fashion-mnist" (read from `dir`) or "synthetic" (from `seed`,
// as many samples as Fashion-MNIST: 60,000 train, 10,000 test). Any other name is refused.
Dataset load_dataset(const std::string& which, const std::string& dir, Split split, uint64_t seed);

}  // namespace brigade::data

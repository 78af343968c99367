// --save-dtype bf16 end to end: the file --save writes holds the trained parameters rounded to
// bf16 (checked against the same run's F32 --save, by a rounding computed in double here),
// --init-from reads it back exactly and says BF16, and the checkpoint beside it stays F32.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "layers/model/safetensors.h"
#include "tests/tools/train/run_binary.h"

using namespace brigade::train::test;
namespace fs = std::filesystem;
namespace st = brigade::safetensors;

namespace {

std::vector<std::string> quick(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model", write_file(dir / "small.model", kSmallModel),
                                   "--data", "synthetic", "--synthetic-count", "128",
                                   "--batch", "32", "--devices", "cpu:0", "--epochs", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Every tensor of a file as float32 values, by name order of the file (F32 as stored, BF16
// with 16 zero bits appended).
std::vector<float> values_of(const st::File& file) {
  std::vector<float> out;
  for (const st::TensorInfo& t : file.tensors) {
    const std::span<const uint8_t> bytes = file.bytes(t);
    if (t.dtype == st::Dtype::F32) {
      for (size_t i = 0; i < bytes.size(); i += 4) {
        float x;
        std::memcpy(&x, bytes.data() + i, 4);
        out.push_back(x);
      }
    } else {
      REQUIRE(t.dtype == st::Dtype::BF16);
      for (size_t i = 0; i < bytes.size(); i += 2) {
        const uint32_t u = (uint32_t{bytes[i + 1]} << 24) | (uint32_t{bytes[i]} << 16);
        float x;
        std::memcpy(&x, &u, 4);
        out.push_back(x);
      }
    }
  }
  return out;
}

// x rounded to bf16's 8 significant bits, for a normal float: scaled so that those bits are
// the integer part, rounded by nearbyint (the default mode: to nearest, ties to even).
double bf16_rounded(float x) {
  if (x == 0) return x;
  const double scale = std::ldexp(1.0, 7 - std::ilogb(x));
  return std::nearbyint(double{x} * scale) / scale;
}

}  // namespace

TEST_CASE("save dtype: --save-dtype bf16 writes the parameters rounded, --init-from reads them") {
  const fs::path dir = temp_dir("save-dtype");
  const std::string f32 = (dir / "f32.safetensors").string(), bf16 = (dir / "bf16.safetensors").string();
  Run a = run_train(quick(dir, {"--save", f32}));
  CAPTURE(a.output);
  REQUIRE(a.status == 0);
  CHECK(a.output.find("parameters saved to " + f32 + " (F32)") != std::string::npos);
  // The same run (same seed, same data), written as BF16; its checkpoint beside it.
  Run b = run_train(quick(dir, {"--save", bf16, "--save-dtype", "bf16", "--checkpoint-dir",
                                (dir / "ckpt").string()}));
  CAPTURE(b.output);
  REQUIRE(b.status == 0);
  CHECK(b.output.find("parameters saved to " + bf16 + " (BF16)") != std::string::npos);

  const st::File exact = st::read_file(f32), rounded = st::read_file(bf16);
  REQUIRE(exact.tensors.size() == rounded.tensors.size());
  for (size_t i = 0; i < exact.tensors.size(); ++i) {
    CHECK(exact.tensors[i].name == rounded.tensors[i].name);
    CHECK(exact.tensors[i].shape == rounded.tensors[i].shape);
    CHECK(rounded.tensors[i].dtype == st::Dtype::BF16);
  }
  const std::vector<float> x = values_of(exact), y = values_of(rounded);
  REQUIRE(x.size() == y.size());
  size_t wrong = 0, changed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (double{y[i]} != bf16_rounded(x[i])) ++wrong;
    if (y[i] != x[i]) ++changed;
  }
  CHECK(wrong == 0);
  CHECK(changed > x.size() / 2);  // rounding did happen: most float values are not bf16 values

  // The checkpoint keeps the fp32 masters: every tensor in it is F32.
  const fs::path checkpoint = dir / "ckpt" / "checkpoint.safetensors";
  REQUIRE(fs::exists(checkpoint));
  for (const st::TensorInfo& t : st::read_file(checkpoint.string()).tensors)
    CHECK_MESSAGE(t.dtype == st::Dtype::F32, t.name);

  // --init-from the BF16 file: said at start-up, and --save-initial then writes its values exactly.
  const std::string initial = (dir / "initial.safetensors").string();
  Run c = run_train(quick(dir, {"--init-from", bf16, "--save-initial", initial, "--steps", "1"}));
  CAPTURE(c.output);
  REQUIRE(c.status == 0);
  CHECK(c.output.find("initial parameters from " + bf16 + " (BF16, widened exactly to fp32)") !=
        std::string::npos);
  const std::vector<float> widened = values_of(st::read_file(initial));
  REQUIRE(widened.size() == y.size());
  CHECK(std::memcmp(widened.data(), y.data(), y.size() * sizeof(float)) == 0);
  fs::remove_all(dir);
}

// The limits of issue 9 that the parsers' own tests (tests/layers, tests/tools/data) leave out,
// each with a hand-made file: boundaries (exactly at a limit, one past it), numbers at the
// edge of 64 bits, and zero-sized claims that must cost nothing. The README's table lists
// where every limit of the issue is tested.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "layers/model/model_file.h"
#include "layers/model/safetensors.h"
#include "tests/tools/data/idx_files.h"
#include "tools/data/idx.h"

namespace model = brigade::model;
namespace st = brigade::safetensors;
using brigade::testing::Bytes;
using brigade::testing::idx_bytes;

namespace {

std::string model_error(const std::string& text) {
  try {
    model::parse_model(text, "t.model");
  } catch (const model::ModelFileError& e) {
    return e.what();
  }
  return "(no error)";
}

// 8-byte little-endian `length`, then `header`, then `data_bytes` zero bytes.
Bytes safetensors_file(uint64_t length, const std::string& header, size_t data_bytes) {
  Bytes out(8 + header.size() + data_bytes, 0);
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}
Bytes safetensors_file(const std::string& header, size_t data_bytes) {
  return safetensors_file(header.size(), header, data_bytes);
}

std::string safetensors_error(const Bytes& bytes) {
  try {
    st::parse(bytes, "h.st");
  } catch (const st::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string idx_error(const Bytes& bytes, int rank, uint64_t max_bytes) {
  try {
    brigade::data::parse_idx(bytes, "a.idx", rank, max_bytes);
  } catch (const brigade::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("model files: sizes that overflow 64 bits are refused, not wrapped") {
  // 2^32 cubed elements: the input's element count itself overflows.
  CHECK(model_error("input 4294967296x4294967296x4294967296\nflatten\n") ==
        "t.model:1:1: input shape (1, 4294967296, 4294967296, 4294967296) would need more than "
        "8 EiB (the size overflows 64 bits) of float32 per sample, more than the 16.0 GiB limit");
  // 2^22 * 1 * 2^20 * 2^20 = 2^62 weights fit in int64; their 4-byte size does not.
  CHECK(model_error("input 8x8x1\nconv2d filters=4194304 kernel=1048576 padding=same\n") ==
        "t.model:2:1: conv2d_1: weights (4194304, 1, 1048576, 1048576) and bias would need more "
        "than 8 EiB (the size overflows 64 bits) of float32, more than the 16.0 GiB limit for "
        "one layer's parameters");
  // The largest number a file may hold: weights + bias overflow in the addition.
  CHECK(model_error("input 1\ndense units=9223372036854775807\n") ==
        "t.model:2:1: dense_1: weights (9223372036854775807, 1) and bias would need more than "
        "8 EiB (the size overflows 64 bits) of float32, more than the 16.0 GiB limit for one "
        "layer's parameters");
}

TEST_CASE("model files: one layer's parameters may reach 16 GiB, not a float more") {
  // 65535 filters of 256x256 on one channel: 65535 * 65536 + 65535 = 2^32 - 1 floats, four
  // bytes under 16 GiB = 2^34 bytes.
  const model::ModelSpec ok = model::parse_model("input 8x8x1\nconv2d filters=65535 kernel=256 padding=same\n", "t.model");
  CHECK(model::infer_shapes(ok.input, ok.layers).total_params == (int64_t{1} << 32) - 1);
  // One filter more: (2^32 + 2^16) floats * 4 = 2^34 + 2^18 bytes, which prints as 16.0 GiB.
  CHECK(model_error("input 8x8x1\nconv2d filters=65536 kernel=256 padding=same\n") ==
        "t.model:2:1: conv2d_1: weights (65536, 1, 256, 256) and bias would need 16.0 GiB of "
        "float32, more than the 16.0 GiB limit for one layer's parameters");
}

TEST_CASE("model files: a stride of 2^63 - 1 computes window sizes without overflow") {
  // same: ceil(8 / s) = 1 output; valid: (8 - 3) / s + 1 = 1 output.
  for (const std::string padding : {"same", "valid"}) {
    CAPTURE(padding);
    const model::ModelSpec m = model::parse_model(
        "input 8x8x1\nconv2d filters=2 kernel=3 stride=9223372036854775807 padding=" + padding +
            "\nflatten\n",
        "t.model");
    const model::ModelShapes s = model::infer_shapes(m.input, m.layers);
    CHECK(s.layers[0].output == std::vector<int64_t>{1, 2, 1, 1});
    CHECK(s.layers[1].output == std::vector<int64_t>{1, 2});
  }
}

TEST_CASE("safetensors: the header bound is exact, and offsets past 2^64 are not numbers") {
  CHECK(safetensors_error(safetensors_file(st::kMaxHeaderBytes + 1, "{}", 0)) ==
        "h.st: header length 100000001 is larger than the 100000000-byte limit");
  // 2^64 does not fit an unsigned 64-bit offset: JSON reads it as a float.
  CHECK(safetensors_error(safetensors_file(
            R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}})", 1)) ==
        "h.st: tensor 'w': data_offsets must be [begin, end], two integers >= 0");
  CHECK(safetensors_error(safetensors_file(
            R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]}})", 1)) ==
        "h.st: tensor 'w': data_offsets [0, 18446744073709551615) lie outside the byte buffer "
        "of 1 bytes");
}

TEST_CASE("safetensors: a zero dimension makes a huge shape cost nothing") {
  // 0 * (2^63 - 1) elements of F64: zero bytes, a valid empty tensor beside a real one.
  const Bytes bytes = safetensors_file(
      R"({"e":{"dtype":"F64","shape":[0,9223372036854775807],"data_offsets":[0,0]},)"
      R"("w":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})",
      3);
  const st::File f = st::parse(bytes, "h.st");
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.find("e")->shape == std::vector<int64_t>{0, 9223372036854775807});
  CHECK(f.bytes(*f.find("e")).empty());
  CHECK(f.bytes(*f.find("w")).size() == 3);
}

TEST_CASE("IDX: the limit on data is exact, for plain and gzip'd files") {
  const Bytes images = idx_bytes({2, 3, 4}, Bytes(24, 7));  // 2 x 3 x 4 = 24 bytes
  for (const Bytes& file : {images, brigade::testing::gzip(images)}) {
    CHECK(idx_error(file, 3, 24) == "(no error)");
    CHECK(idx_error(file, 3, 23) ==
          "IDX file 'a.idx': the header declares 2 x 3 x 4 = 24 bytes of data, which would need "
          "24 B of memory, more than the limit of 23 B");
  }
}

TEST_CASE("IDX: a gzip bomb is refused from its header, before inflating") {
  // 1 MiB of zeros deflates to about a kilobyte; a 64 KiB limit refuses it unread.
  const Bytes bomb = brigade::testing::gzip(idx_bytes({1 << 20}, Bytes(1 << 20, 0)));
  REQUIRE(bomb.size() < 4096);
  CHECK(idx_error(bomb, 1, 1 << 16) ==
        "IDX file 'a.idx': the header declares 1048576 bytes of data, which would need 1.0 MiB "
        "of memory, more than the limit of 64.0 KiB");
}

TEST_CASE("IDX: a zero dimension makes huge ones cost nothing") {
  // 0 x (2^32 - 1) x (2^32 - 1) images: no data, no overflow.
  const Bytes empty = idx_bytes({0, 0xFFFFFFFF, 0xFFFFFFFF}, {});
  const brigade::data::IdxArray a = brigade::data::parse_idx(empty, "a.idx", 3);
  CHECK(a.dims == std::vector<uint32_t>{0, 0xFFFFFFFF, 0xFFFFFFFF});
  CHECK(a.data.empty());
  CHECK(idx_error(idx_bytes({0, 0xFFFFFFFF, 0xFFFFFFFF}, {1}), 3, brigade::data::kIdxMaxDataBytes) ==
        "IDX file 'a.idx': trailing data: the file holds 1 bytes after its header, but the header "
        "declares 0 x 4294967295 x 4294967295 = 0 bytes");
}

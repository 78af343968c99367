// Parameter files: a bit-exact round trip through safetensors, a mismatching file that is
// refused with every mismatch listed and nothing loaded, and BF16 files: one whose bytes the
// test writes itself, and what save_parameters writes against a rounding written here.
#include "layers/param_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "layers/model/safetensors.h"
#include "layers/sequential.h"

namespace brigade::layers {
namespace {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("brigade_params_") + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::unique_ptr<Sequential> model_of(uint64_t seed, int64_t units) {
  auto m = std::make_unique<Sequential>(seed);
  m->add(Conv2D(3, {3, 3}, "relu", {7, 7, 2}));
  m->add(Flatten());
  m->add(Dense(units, "softmax"));
  return m;
}

TEST_CASE("saved parameters load back bit-exactly, under PyTorch's names and layouts") {
  const std::string path = temp_path("roundtrip.safetensors");
  auto a = model_of(1, 4);
  save_parameters(a->parameters(), path, {{"model", "test"}});

  const safetensors::File file = safetensors::read_file(path);
  REQUIRE(file.find("conv2d_1.weight") != nullptr);
  CHECK(file.find("conv2d_1.weight")->shape == std::vector<int64_t>{3, 2, 3, 3});  // OIHW
  CHECK(file.find("dense_1.weight")->shape == std::vector<int64_t>{4, 75});       // (out, in)
  CHECK(file.metadata.at("model") == "test");

  auto b = model_of(2, 4);  // another seed: different values before the load
  CHECK(b->parameters()[0]->value.to_vector() != a->parameters()[0]->value.to_vector());
  load_parameters(b->parameters(), path);
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    const std::vector<float> va = a->parameters()[i]->value.to_vector();
    const std::vector<float> vb = b->parameters()[i]->value.to_vector();
    REQUIRE(va.size() == vb.size());
    // Bit-exact: compare the bytes, not the float values (which would let -0 == 0 pass).
    CHECK(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
  }
  std::filesystem::remove(path);
}

TEST_CASE("a file of another model is refused with every mismatch, and nothing is loaded") {
  const std::string path = temp_path("mismatch.safetensors");
  auto a = model_of(1, 4);
  save_parameters(a->parameters(), path);
  auto other = std::make_unique<Sequential>(3);
  other->add(Conv2D(3, {3, 3}, "relu", {7, 7, 2}));
  other->add(Flatten());
  other->add(Dense(5, "relu"));     // dense_1 is (5, 75) here, (4, 75) in the file
  other->add(Dense(2));             // dense_2 is not in the file at all
  const std::vector<float> before = other->parameters()[0]->value.to_vector();
  try {
    load_parameters(other->parameters(), path);
    FAIL("the mismatching file was loaded");
  } catch (const safetensors::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("dense_1.weight") != std::string::npos);
    CHECK(what.find("dense_1.bias") != std::string::npos);
    CHECK(what.find("dense_2.weight") != std::string::npos);
    CHECK(what.find("dense_2.bias") != std::string::npos);
  }
  CHECK(other->parameters()[0]->value.to_vector() == before);  // conv2d_1 untouched
  std::filesystem::remove(path);
}

// ---- BF16 ----------------------------------------------------------------------------------

// conv2d_1.weight (1, 2, 1, 1), conv2d_1.bias (1), dense_1.weight (2, 1), dense_1.bias (2):
// seven values, few enough to write a file of by hand.
std::unique_ptr<Sequential> tiny_model(uint64_t seed) {
  auto m = std::make_unique<Sequential>(seed);
  m->add(Conv2D(1, {1, 1}, "relu", {1, 1, 2}));
  m->add(Flatten());
  m->add(Dense(2));
  return m;
}

// A safetensors file, byte by byte: the 8-byte little-endian header length, the JSON, the data.
void write_bytes(const std::string& path, const std::string& json, const std::vector<uint8_t>& data) {
  std::string file;
  for (int i = 0; i < 8; ++i) file += static_cast<char>((uint64_t{json.size()} >> (8 * i)) & 0xFF);
  file += json;
  file.append(reinterpret_cast<const char*>(data.data()), data.size());
  std::ofstream(path, std::ios::binary) << file;
}

// The tiny model's tensors, all of `dtype`, over 14 bytes of data (7 two-byte values).
std::string tiny_header(const std::string& dtype) {
  return R"({"conv2d_1.weight":{"dtype":")" + dtype + R"(","shape":[1,2,1,1],"data_offsets":[0,4]},)"
         R"("conv2d_1.bias":{"dtype":")" + dtype + R"(","shape":[1],"data_offsets":[4,6]},)"
         R"("dense_1.weight":{"dtype":")" + dtype + R"(","shape":[2,1],"data_offsets":[6,10]},)"
         R"("dense_1.bias":{"dtype":")" + dtype + R"(","shape":[2],"data_offsets":[10,14]}})";
}

// bf16 values, little-endian, and the floats they are (worked out by hand: a bf16 is the top
// half of a float, so 0x3F80 is 1.0f, 0x4049 is 3.140625f, 0x0001 the float 0x00010000 = 2^-133).
const std::vector<uint16_t> kBf16Bits = {0x3F80, 0xC000, 0x4049, 0x8000, 0x0001, 0x7F80, 0xBE80};
const std::vector<float> kBf16Values = {1.0f, -2.0f, 3.140625f, -0.0f, 0x1p-133f,
                                        std::numeric_limits<float>::infinity(), -0.25f};

std::vector<uint8_t> little_endian(const std::vector<uint16_t>& bits) {
  std::vector<uint8_t> out;
  for (uint16_t b : bits) {
    out.push_back(static_cast<uint8_t>(b & 0xFF));
    out.push_back(static_cast<uint8_t>(b >> 8));
  }
  return out;
}

std::vector<float> all_values(const std::vector<Parameter*>& params) {
  std::vector<float> out;
  for (const Parameter* p : params)
    for (float v : p->value.to_vector()) out.push_back(v);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("a BF16 file written byte by byte loads to the floats its bits are, and says BF16") {
  const std::string path = temp_path("hand.safetensors");
  write_bytes(path, tiny_header("BF16"), little_endian(kBf16Bits));
  auto m = tiny_model(1);
  CHECK(load_parameters(m->parameters(), path) == safetensors::Dtype::BF16);
  CHECK(same_bits(all_values(m->parameters()), kBf16Values));  // -0 and 2^-133 included
  std::filesystem::remove(path);
}

// Round to nearest, ties to even, on the float's bits: keep the top 16, and add one to them
// when the dropped 16 are more than half (0x8000), or exactly half and the kept part is odd.
// A NaN stays a NaN (the quiet bit set, so dropping payload bits cannot make it an Inf).
uint16_t reference_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint16_t kept = static_cast<uint16_t>(u >> 16), dropped = static_cast<uint16_t>(u & 0xFFFF);
  if (std::isnan(x)) return kept | 0x0040;
  const bool up = dropped > 0x8000 || (dropped == 0x8000 && (kept & 1));
  return static_cast<uint16_t>(kept + (up ? 1 : 0));
}

float widened(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

TEST_CASE("parameters saved as BF16 load back as the parameters rounded to nearest even") {
  const std::string path = temp_path("bf16.safetensors");
  auto a = tiny_model(1);
  // Ties both ways (1 + 2^-8 rounds down to 1, 1 + 3*2^-8 up to 1 + 2^-6), just above a tie,
  // a NaN, the largest float (rounds to Inf) and a float denormal.
  const std::vector<float> chosen = {0x1.01p0f, 0x1.03p0f, 0x1.010002p0f,
                                     std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::max(), 0x1.8p-140f, -0.3f};
  size_t next = 0;
  for (Parameter* p : a->parameters()) {
    std::vector<float> v(static_cast<size_t>(p->value.numel()));
    for (float& x : v) x = chosen[next++];
    const Stream& s = p->value.stream();
    copy_async(p->value, Tensor::from_vector(v, p->value.shape(), s), s);
    s.synchronize();
  }
  save_parameters(a->parameters(), path, {}, safetensors::Dtype::BF16);

  const safetensors::File file = safetensors::read_file(path);
  for (const safetensors::TensorInfo& t : file.tensors) CHECK(t.dtype == safetensors::Dtype::BF16);
  CHECK(file.data.size() == 7 * 2);

  auto b = tiny_model(2);
  CHECK(load_parameters(b->parameters(), path) == safetensors::Dtype::BF16);
  std::vector<float> expected;
  for (float x : chosen) expected.push_back(widened(reference_bf16(x)));
  CHECK(expected[0] == 1.0f);  // the reference itself, on the hand-worked ties
  CHECK(expected[1] == 0x1.04p0f);
  CHECK(std::isinf(expected[4]));
  CHECK(same_bits(all_values(b->parameters()), expected));
  std::filesystem::remove(path);
}

TEST_CASE("a truncated BF16 file, a dtype other than F32 and BF16, and a mixed file are refused") {
  auto m = tiny_model(1);
  const std::vector<float> before = all_values(m->parameters());
  auto refused = [&](const std::string& path, const std::vector<std::string>& named) {
    try {
      load_parameters(m->parameters(), path);
      FAIL("loaded " << path);
    } catch (const safetensors::Error& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find(path) != std::string::npos, what);
      for (const std::string& n : named) CHECK_MESSAGE(what.find(n) != std::string::npos, what);
    }
    CHECK(same_bits(all_values(m->parameters()), before));  // nothing loaded
  };

  SUBCASE("truncated: the last value's second byte is missing") {
    const std::string path = temp_path("truncated.safetensors");
    std::vector<uint8_t> data = little_endian(kBf16Bits);
    data.pop_back();
    write_bytes(path, tiny_header("BF16"), data);
    refused(path, {});
    std::filesystem::remove(path);
  }
  SUBCASE("F16: two bytes a value, but not a dtype parameters are read from") {
    const std::string path = temp_path("f16.safetensors");
    write_bytes(path, tiny_header("F16"), little_endian(kBf16Bits));
    refused(path, {"conv2d_1.weight", "F16"});
    std::filesystem::remove(path);
  }
  SUBCASE("BF16 weights beside an F32 bias") {
    const std::string path = temp_path("mixed.safetensors");
    std::string header = tiny_header("BF16");
    const std::string bias = R"("conv2d_1.bias":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]})";
    header.replace(header.find(bias), bias.size(),
                   R"("conv2d_1.bias":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})");
    for (const auto& [from, to] : {std::pair{"[6,10]", "[8,12]"}, std::pair{"[10,14]", "[12,16]"}})
      header.replace(header.find(from), std::string(from).size(), to);
    std::vector<uint8_t> data = little_endian(kBf16Bits);
    data.insert(data.begin() + 4, {0, 0});  // the bias 0x4049 as the F32 0x40490000
    write_bytes(path, header, data);
    refused(path, {"conv2d_1.bias", "F32", "expected BF16"});
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace brigade::layers

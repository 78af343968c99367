// Parameter files: a bit-exact round trip through safetensors, and a mismatching file that is
// refused with every mismatch listed and nothing loaded.
#include "layers/param_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

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

}  // namespace
}  // namespace brigade::layers

// Safetensors: a file assembled by hand from the spec, the writer's bit-exact round trip,
// the check that reports every mismatch, and the atomic write that never loses a file.
#include "layers/model/safetensors.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "layers/model/layer_spec.h"
#include "tests/layers/model/seed_network.h"

namespace st = brigade::safetensors;

namespace {

// A scratch directory of this test process, removed at the end of each test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("brigade_st_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("a file assembled by hand from the spec reads correctly") {
  // Header and buffer written out by hand, independently of the writer: a 2x3 F32 tensor
  // at [0, 24), an I64 scalar at [24, 32), an empty U8 tensor at [32, 32).
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[],"data_offsets":[24,32]},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("empty":{"dtype":"U8","shape":[0,5],"data_offsets":[32,32]}})";
  std::vector<uint8_t> bytes(8);
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  const float a[6] = {1.0f, -2.5f, 0.0f, 3.25f, 1e-3f, -0.0f};
  const uint8_t b[8] = {0x2a, 0, 0, 0, 0, 0, 0, 0};  // 42, little-endian
  bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const uint8_t*>(a) + 24);
  bytes.insert(bytes.end(), b, b + 8);

  const st::File f = st::parse(bytes, "hand.safetensors");
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.tensors[0].name == "a");  // in offset order
  CHECK(f.metadata.at("format") == "pt");
  const st::TensorInfo* ta = f.find("a");
  REQUIRE(ta != nullptr);
  CHECK(ta->dtype == st::Dtype::F32);
  CHECK(ta->shape == std::vector<int64_t>{2, 3});
  REQUIRE(f.bytes(*ta).size() == 24);
  CHECK(std::memcmp(f.bytes(*ta).data(), a, 24) == 0);
  const st::TensorInfo* tb = f.find("b");
  REQUIRE(tb != nullptr);
  CHECK(tb->shape.empty());
  int64_t v = 0;
  std::memcpy(&v, f.bytes(*tb).data(), 8);
  CHECK(v == 42);
  CHECK(f.find("empty")->shape == std::vector<int64_t>{0, 5});
  CHECK(f.bytes(*f.find("empty")).empty());
  CHECK(f.find("nope") == nullptr);
}

TEST_CASE("write then read is bit-exact, with metadata, and the buffer is 8-byte aligned") {
  TempDir dir;
  std::mt19937 rng(7);
  std::vector<float> w(32 * 1 * 3 * 3);
  for (float& x : w) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  w[0] = -0.0f;
  w[1] = std::numeric_limits<float>::denorm_min();
  w[2] = std::numeric_limits<float>::quiet_NaN();
  w[3] = -std::numeric_limits<float>::infinity();
  std::vector<float> bias(32, 0.0f);
  std::vector<double> d = {M_PI, -1e300};
  const auto wb = as_bytes(w), bb = as_bytes(bias), db = as_bytes(d);
  const std::vector<st::TensorToWrite> tensors = {
      {"conv2d_1.weight", st::Dtype::F32, {32, 1, 3, 3}, wb},
      {"conv2d_1.bias", st::Dtype::F32, {32}, bb},
      {"x", st::Dtype::F64, {2}, db},
  };
  const std::string path = dir.file("p.safetensors");
  st::write_file(path, tensors, {{"step", "100"}, {"model", "seed_cnn"}});

  const std::vector<uint8_t> raw = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[static_cast<size_t>(i)];
  CHECK((8 + n) % 8 == 0);
  CHECK(raw.size() == 8 + n + wb.size() + bb.size() + db.size());

  const st::File f = st::read_file(path);
  CHECK(f.source == path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"step", "100"}, {"model", "seed_cnn"}});
  REQUIRE(f.tensors.size() == 3);
  for (const st::TensorToWrite& t : tensors) {
    const st::TensorInfo* r = f.find(t.name);
    REQUIRE(r != nullptr);
    CHECK(r->dtype == t.dtype);
    CHECK(r->shape == t.shape);
    const auto got = f.bytes(*r);
    CHECK(std::vector<uint8_t>(got.begin(), got.end()) ==
          std::vector<uint8_t>(t.bytes.begin(), t.bytes.end()));
  }
  // The written tensors lie in the order given, as the spec's reference writer lays them.
  CHECK(f.tensors[0].name == "conv2d_1.weight");
  CHECK(f.tensors[2].begin == wb.size() + bb.size());
}

// read_header: what read_file says of a file (its tensors' names, dtypes, shapes, byte ranges,
// its metadata) without reading the bytes; a file cut short is refused alike, by its header's
// byte ranges against the file's size.
TEST_CASE("read_header gives read_file's answer without the bytes, and refuses alike") {
  TempDir dir;
  const std::vector<float> w(1000, 0.5f);
  const auto wb = as_bytes(w);
  const std::vector<st::TensorToWrite> tensors = {{"w", st::Dtype::F32, {10, 100}, wb},
                                                  {"b", st::Dtype::F32, {10}, {wb.data(), 40}}};
  const std::string path = dir.file("h.safetensors");
  st::write_file(path, tensors, {{"step", "7"}});
  const st::File whole = st::read_file(path), header = st::read_header(path);
  CHECK(header.data.empty());
  CHECK(whole.data.size() == 4040);
  CHECK(header.metadata == whole.metadata);
  REQUIRE(header.tensors.size() == whole.tensors.size());
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    CAPTURE(i);
    CHECK(header.tensors[i].name == whole.tensors[i].name);
    CHECK(header.tensors[i].dtype == whole.tensors[i].dtype);
    CHECK(header.tensors[i].shape == whole.tensors[i].shape);
    CHECK(header.tensors[i].begin == whole.tensors[i].begin);
    CHECK(header.tensors[i].end == whole.tensors[i].end);
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  std::string by_file, by_header;
  try {
    st::read_file(path);
  } catch (const st::Error& e) {
    by_file = e.what();
  }
  try {
    st::read_header(path);
  } catch (const st::Error& e) {
    by_header = e.what();
  }
  CHECK(!by_file.empty());
  CHECK(by_header == by_file);
}

TEST_CASE("the writer refuses inconsistent input before touching the disk") {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const std::vector<uint8_t> six(6);
  const std::vector<st::TensorToWrite> wrong = {{"t", st::Dtype::F32, {2}, six}};
  CHECK_THROWS_WITH_AS(st::write_file(path, wrong),
                       (path + ": tensor 't': shape [2] of F32 needs 8 bytes but 6 were given").c_str(),
                       st::Error);
  const std::vector<st::TensorToWrite> twice = {{"t", st::Dtype::U8, {6}, six},
                                                {"t", st::Dtype::U8, {6}, six}};
  CHECK_THROWS_WITH_AS(st::write_file(path, twice), (path + ": tensor 't': written twice").c_str(),
                       st::Error);
  const std::vector<st::TensorToWrite> reserved = {{"__metadata__", st::Dtype::U8, {6}, six}};
  CHECK_THROWS_AS(st::write_file(path, reserved), st::Error);
  CHECK(!std::filesystem::exists(path));
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("check() reports every mismatch in one message") {
  // The seed network's parameters, as the model would expect them.
  using namespace brigade::model;
  const ModelShapes shapes = infer_shapes(test::kSeedInput, test::seed_layers());
  std::vector<st::Expected> expected;
  for (const LayerShape& l : shapes.layers)
    for (const ParamSpec& p : l.param_specs) expected.push_back({p.name, st::Dtype::F32, p.shape});
  REQUIRE(expected.size() == 12);

  TempDir dir;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<st::TensorToWrite> tensors;
  for (const st::Expected& e : expected) {
    int64_t n = 4;
    for (int64_t s : e.shape) n *= s;
    storage.emplace_back(static_cast<size_t>(n));
  }
  for (size_t i = 0; i < expected.size(); ++i)
    tensors.push_back({expected[i].name, st::Dtype::F32, expected[i].shape, storage[i]});
  const std::string good = dir.file("good.safetensors");
  st::write_file(good, tensors);
  st::check(st::read_file(good), expected);  // agrees: no throw
  int64_t total = 0;
  for (const st::TensorInfo& t : st::read_file(good).tensors) total += static_cast<int64_t>(t.end - t.begin) / 4;
  CHECK(total == 278974);

  // Now break it four ways: drop dense_2.bias, add an extra tensor (its name with a DEL byte), transpose dense_1's
  // weight, and store conv2d_1.bias as F16.
  std::vector<st::TensorToWrite> bad(tensors.begin(), tensors.end() - 1);
  const std::vector<uint8_t> extra(4), half(64);
  bad.push_back({"ex\x7ftra", st::Dtype::F32, {1}, extra});  // names are escaped in messages
  bad[8].shape = {64, 1500};
  bad[1] = {"conv2d_1.bias", st::Dtype::F16, {32}, half};
  const std::string path = dir.file("bad.safetensors");
  st::write_file(path, bad);
  CHECK_THROWS_WITH_AS(st::check(st::read_file(path), expected),
                       (path + ": 4 mismatches with the model:\n"
                               "  tensor 'conv2d_1.bias': dtype F16, expected F32\n"
                               "  tensor 'dense_1.weight': shape [64, 1500], expected [1500, 64]\n"
                               "  missing tensor 'dense_2.bias' (expected F32 [10])\n"
                               "  unexpected tensor 'ex\\x7ftra' (F32 [1])")
                           .c_str(),
                       st::Error);
}

TEST_CASE("a failed write leaves the previous file intact and no temporary behind") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<float> v1 = {1, 2, 3, 4};
  const auto b1 = as_bytes(v1);
  const std::vector<st::TensorToWrite> first = {{"w", st::Dtype::F32, {4}, b1}};
  st::write_file(path, first);
  const std::vector<uint8_t> before = slurp(path);

  std::vector<float> v2(1 << 16, 9.0f);  // 256 KiB: larger than the file-size limit below
  const auto b2 = as_bytes(v2);
  const std::vector<st::TensorToWrite> second = {{"w", st::Dtype::F32, {1 << 16}, b2}};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());

  SUBCASE("the temporary file cannot be created") {
    std::filesystem::create_directory(tmp);  // a directory squats on the temporary's name
    CHECK_THROWS_WITH_AS(st::write_file(path, second),
                         ("cannot create '" + tmp + "' to write " + path + ": Is a directory").c_str(),
                         brigade::Error);
    std::filesystem::remove(tmp);
  }
  SUBCASE("a write fails half-way (the file-size limit is hit)") {
    // RLIMIT_FSIZE makes write() fail with EFBIG past 64 KiB, a real mid-file I/O error;
    // SIGXFSZ would otherwise kill the process. Both are restored before checking.
    struct rlimit old {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct rlimit small = old;
    small.rlim_cur = 64 << 10;
    auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string message;
    try {
      st::write_file(path, second);
    } catch (const brigade::Error& e) {  // an I/O failure, not a malformed file
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    CHECK(message == path + ": write failed while writing '" + tmp +
                         "': File too large (the previous file, if any, is untouched)");
  }
  CHECK(slurp(path) == before);
  CHECK(!std::filesystem::exists(tmp));
  CHECK(st::read_file(path).tensors.at(0).shape == std::vector<int64_t>{4});
}

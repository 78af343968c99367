// The IDX reader: hand-made files, plain and gzip'd, read back; every malformed case refused
// with its exact message, before anything large is allocated.
#include "tools/data/idx.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "engine/error.h"
#include "tests/tools/data/idx_files.h"
#include "tests/support/error_text.h"

using brigade::data::parse_idx;
using brigade::data::read_idx_file;
using brigade::testing::error_of;
using brigade::testing::Bytes;
using brigade::testing::gzip;
using brigade::testing::idx_bytes;
using brigade::testing::TempDir;

namespace {

// A deterministic byte pattern that deflate cannot shrink much (so a cut lands mid-stream).
Bytes noise(size_t n) {
  Bytes out(n);
  uint32_t x = 12345;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;  // Numerical Recipes' LCG
    b = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

}  // namespace

TEST_CASE("plain and gzip'd IDX files read back, whatever their names") {
  TempDir dir;
  const Bytes labels = {9, 0, 0, 3, 0, 2, 7};
  const Bytes pixels = noise(2 * 3 * 4);  // (2, 3, 4)

  SUBCASE("labels, plain") {
    const auto got = read_idx_file(dir.write("labels.idx", idx_bytes({7}, labels)), 1);
    CHECK(got.dims == std::vector<uint32_t>{7});
    CHECK(got.data == labels);
  }
  SUBCASE("images, gzip'd, in a file whose name does not say so") {
    const auto got = read_idx_file(dir.write("images.idx", gzip(idx_bytes({2, 3, 4}, pixels))), 3);
    CHECK(got.dims == std::vector<uint32_t>{2, 3, 4});
    CHECK(got.data == pixels);
  }
  SUBCASE("a plain file named .gz is read as plain") {
    const auto got = read_idx_file(dir.write("labels.gz", idx_bytes({7}, labels)), 1);
    CHECK(got.data == labels);
  }
  SUBCASE("from memory, and larger than one read chunk") {
    const Bytes big = noise(300'000);
    const auto plain = parse_idx(idx_bytes({300'000}, big), "mem", 1);
    const auto packed = parse_idx(gzip(idx_bytes({300'000}, big)), "mem.gz", 1);
    CHECK(plain.data == big);
    CHECK(packed.data == big);
  }
  SUBCASE("an empty array is well formed") {
    const auto got = read_idx_file(dir.write("empty.idx", idx_bytes({0}, {})), 1);
    CHECK(got.dims == std::vector<uint32_t>{0});
    CHECK(got.data.empty());
  }
}

TEST_CASE("malformed headers are refused with a message naming the file") {
  TempDir dir;
  SUBCASE("bad magic") {
    const std::string p = dir.write("a", {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0});
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': bad magic number 0x12345678: an IDX file starts with two zero "
          "bytes, its element type and its number of dimensions (is this an IDX file?)");
  }
  SUBCASE("unsupported element type") {
    const std::string p = dir.write("a", idx_bytes({2}, Bytes(8), 0x0D));
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': element type 0x0D (float32) is not supported: Brigade reads "
          "IDX files of unsigned bytes (type 0x08)");
  }
  SUBCASE("wrong dimension count: labels read as images") {
    const std::string p = dir.write("a", idx_bytes({3}, {1, 2, 3}));
    CHECK(error_of([&] { read_idx_file(p, 3); }) ==
          "IDX file '" + p + "': has 1 dimension (magic 0x00000801), expected 3 dimensions "
          "(magic 0x00000803: images, count x rows x cols)");
  }
  SUBCASE("empty file") {
    const std::string p = dir.write("a", {});
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': truncated: 0 bytes, too short for the 4-byte IDX magic number");
  }
  SUBCASE("header cut inside the dimensions") {
    const std::string p = dir.write("a", {0, 0, 8, 3, 0, 0, 0, 5});
    CHECK(error_of([&] { read_idx_file(p, 3); }) ==
          "IDX file '" + p + "': truncated: the header ends after 4 of its 12 dimension bytes");
  }
  SUBCASE("size overflow") {
    const std::string p = dir.write("a", idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
    CHECK(error_of([&] { read_idx_file(p, 3); }) ==
          "IDX file '" + p + "': the dimensions 4294967295 x 4294967295 x 4294967295 declare "
          "more than 2^64 bytes of data (overflow)");
  }
  SUBCASE("missing file") {
    const std::string p = dir.path() + "/no-such-file.gz";
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': cannot open: No such file or directory");
  }
  SUBCASE("a directory") {
    CHECK(error_of([&] { read_idx_file(dir.path(), 1); }) ==
          "IDX file '" + dir.path() + "': is not a regular file");
  }
}

// 1e9 images of 28 x 28 = 784e9 bytes = 730.2 GiB, claimed by a 1 KB file: refused from the
// header alone (an attempt to allocate would throw std::bad_alloc, not these messages).
TEST_CASE("a huge claim is refused before allocating, saying how much memory it would need") {
  TempDir dir;
  const Bytes header_and_kb = idx_bytes({1'000'000'000, 28, 28}, Bytes(1000));
  const std::string declared = "1000000000 x 28 x 28 = 784000000000 bytes";
  SUBCASE("over the limit on data") {
    const std::string p = dir.write("a", header_and_kb);
    CHECK(error_of([&] { read_idx_file(p, 3); }) ==
          "IDX file '" + p + "': the header declares " + declared + " of data, which would need "
          "730.2 GiB of memory, more than the limit of 4.0 GiB");
  }
  SUBCASE("plain: more than the file holds, even with no limit") {
    const std::string p = dir.write("a", header_and_kb);
    CHECK(error_of([&] { read_idx_file(p, 3, std::numeric_limits<uint64_t>::max()); }) ==
          "IDX file '" + p + "': truncated: the header declares " + declared + " of data (would "
          "need 730.2 GiB of memory) but the file holds only 1000 bytes after its header");
  }
  SUBCASE("gzip: more than deflate's best ratio allows, even with no limit") {
    const Bytes packed = gzip(header_and_kb);
    const std::string p = dir.write("a", packed);
    const std::string size = std::to_string(packed.size());
    CHECK(error_of([&] { read_idx_file(p, 3, std::numeric_limits<uint64_t>::max()); }) ==
          "IDX file '" + p + "': the header declares " + declared + " of data (would need "
          "730.2 GiB of memory), more than a " + size + "-byte gzip file can hold (at most " +
          std::to_string(packed.size() * 1032) + " bytes): truncated or corrupt");
  }
}

TEST_CASE("the data must end exactly where the header says") {
  TempDir dir;
  SUBCASE("plain: claimed size larger than the file") {
    const std::string p = dir.write("a", idx_bytes({10}, Bytes(7)));
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': truncated: the header declares 10 bytes of data (would need "
          "10 B of memory) but the file holds only 7 bytes after its header");
  }
  SUBCASE("plain: trailing data") {
    const std::string p = dir.write("a", idx_bytes({3}, Bytes(4)));
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': trailing data: the file holds 4 bytes after its header, but "
          "the header declares 3 bytes");
  }
  SUBCASE("gzip: the stream holds less than the header declares") {
    const std::string p = dir.write("a", gzip(idx_bytes({2, 2, 5}, Bytes(7))));
    CHECK(error_of([&] { read_idx_file(p, 3); }) ==
          "IDX file '" + p + "': truncated: the data ends after 7 of the 2 x 2 x 5 = 20 bytes "
          "the header declares");
  }
  SUBCASE("gzip: the stream holds more than the header declares") {
    const std::string p = dir.write("a", gzip(idx_bytes({3}, Bytes(4))));
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': trailing data after the 3 bytes the header declares");
  }
  SUBCASE("gzip: bytes after the end of the gzip stream") {
    Bytes packed = gzip(idx_bytes({3}, {1, 2, 3}));
    packed.push_back(0);
    const std::string p = dir.write("a", packed);
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': trailing bytes after the end of the gzip stream (multi-member "
          "gzip files are not supported)");
  }
  SUBCASE("gzip: truncated before the trailer (all 11 bytes inflate, the end marker is missing)") {
    Bytes packed = gzip(idx_bytes({3}, {1, 2, 3}));
    packed.resize(packed.size() - 8);  // the CRC-32 and the length
    const std::string p = dir.write("a", packed);
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': truncated gzip stream: the compressed data ends after 11 "
          "decompressed bytes, before its end marker");
  }
  SUBCASE("gzip: truncated in the middle") {
    Bytes packed = gzip(idx_bytes({100'000}, noise(100'000)));
    packed.resize(packed.size() / 2);
    const std::string p = dir.write("a", packed);
    const std::string prefix = "IDX file '" + p + "': truncated gzip stream: the compressed data ends after ";
    CHECK(error_of([&] { read_idx_file(p, 1); }).substr(0, prefix.size()) == prefix);
  }
  SUBCASE("gzip: a corrupt checksum") {
    Bytes packed = gzip(idx_bytes({3}, {1, 2, 3}));
    packed[packed.size() - 8] ^= 0xFF;  // first byte of the CRC-32
    const std::string p = dir.write("a", packed);
    CHECK(error_of([&] { read_idx_file(p, 1); }) ==
          "IDX file '" + p + "': corrupt gzip stream (zlib: incorrect data check)");
  }
}

// A damaged download: one byte changed in the middle of a gzip'd file. Inflating it gives
// other bytes — a header that says something else, more data than declared, less — and what
// tells them apart from a well-formed file that says so is the gzip stream's CRC-32 and
// length. Every such file is reported as corrupt (or, when inflate wanted more input, as
// truncated), never as an IDX file whose header and data disagree.
TEST_CASE("a gzip'd file with a corrupt byte is said to be corrupt, naming the file") {
  Bytes images(20 * 28 * 28, 0);  // Fashion-MNIST-like: a dark border around each picture
  const Bytes middle = noise(images.size());
  for (size_t i = 0; i < images.size(); ++i)
    if (size_t r = i / 28 % 28, c = i % 28; r > 4 && r < 24 && c > 6 && c < 22)
      images[i] = middle[i] & 0xf0;
  const Bytes packed = gzip(idx_bytes({20, 28, 28}, images));
  const auto damaged = [&](size_t at) {
    Bytes b = packed;
    b[at] ^= 0x10;
    return b;
  };
  // Every byte of the deflate data, between the 10-byte gzip header and the 8-byte trailer.
  int refused = 0;
  for (size_t at = 10; at + 8 < packed.size(); ++at) {
    const std::string error = error_of([&] { parse_idx(damaged(at), "f.gz", 3); });
    if (error.empty()) continue;  // the change decoded to the same bytes
    ++refused;
    CAPTURE(at);
    CAPTURE(error);
    CHECK((error.starts_with("IDX file 'f.gz': corrupt gzip stream (zlib: ") ||
           error.starts_with("IDX file 'f.gz': truncated gzip stream: ")));
  }
  CHECK(refused > static_cast<int>(packed.size()) / 2);
  TempDir dir;
  const std::string p = dir.write("train-images-idx3-ubyte.gz", damaged(packed.size() / 2));
  CHECK(error_of([&] { read_idx_file(p, 3); }).starts_with("IDX file '" + p + "': corrupt gzip"));
}

// Hostile safetensors files (issue 9): each limit the reader enforces, with a hand-made
// file and the exact message. Files are assembled here byte by byte, never by the writer.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "layers/model/safetensors.h"

namespace st = brigade::safetensors;

// GCC 12 at -O3 reports impossible overlaps in `"literal" + std::string` (GCC bug 105651,
// a false -Wrestrict positive); this file builds many headers that way.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace {

// 8-byte little-endian `length`, then `header`, then `data_bytes` zero bytes.
std::vector<uint8_t> file_with(uint64_t length, const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}
std::vector<uint8_t> file_with(const std::string& header, size_t data_bytes) {
  return file_with(header.size(), header, data_bytes);
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    st::parse(bytes, "h.st");
  } catch (const st::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The same bytes through read_file, which must give the same verdict from disk.
std::string error_on_disk(const std::vector<uint8_t>& bytes) {
  const std::string path = "/tmp/brigade_limits_" + std::to_string(::getpid()) + ".st";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::string message = "(no error)";
  try {
    st::read_file(path);
  } catch (const st::Error& e) {
    message = e.what();
  }
  std::remove(path.c_str());
  // Put the label in place of the path so both readers' messages compare equal.
  if (message.rfind(path, 0) == 0) message = "h.st" + message.substr(path.size());
  return message;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

std::string name_of(int i) {
  std::string name = "t";
  return name.append(std::to_string(i));
}

}  // namespace

TEST_CASE("the header length is bounded by the file and by 100 MB before anything is read") {
  const std::vector<uint8_t> tiny = {1, 2, 3};
  CHECK(error_of(tiny) ==
        "h.st: only 3 bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  CHECK(error_on_disk(tiny) == error_of(tiny));
  const auto huge = file_with(uint64_t{1} << 62, "{}", 0);
  CHECK(error_of(huge) == "h.st: header length 4611686018427387904 is larger than the 100000000-byte limit");
  CHECK(error_on_disk(huge) == error_of(huge));
  const auto past = file_with(1000, "{}", 10);
  CHECK(error_of(past) ==
        "h.st: header length 1000 runs past the end of the file (12 bytes follow the length field)");
  CHECK(error_on_disk(past) == error_of(past));
  CHECK_THROWS_WITH_AS(st::read_file("/nonexistent/p.st"),
                       "cannot open safetensors file '/nonexistent/p.st': No such file or directory",
                       st::Error);
  CHECK_THROWS_WITH_AS(st::read_file("/tmp"), "/tmp: not a regular file", st::Error);
}

TEST_CASE("the header must be one JSON object of bounded depth without duplicate keys") {
  CHECK(error_of(file_with("[1,2]", 0)) ==
        "h.st: header does not start with '{' (not a safetensors file?)");
  CHECK(error_of(file_with("", 0)) == "h.st: header does not start with '{' (not a safetensors file?)");
  CHECK(error_of(file_with("{\"a\":", 0)).rfind("h.st: header is not valid JSON: [json.exception.parse_error.101]", 0) == 0);
  CHECK(error_of(file_with("{} trailing", 0)).rfind("h.st: header is not valid JSON:", 0) == 0);
  // nlohmann's message quotes the offending bytes: they arrive escaped and cut short.
  const std::string del = error_of(file_with("{\"a\":{\"shape\":[2,\x7f" + std::string(100000, 'x') + "]}}", 0));
  CHECK(del.find("\\x7f") != std::string::npos);
  CHECK(del.find('\x7f') == std::string::npos);
  CHECK(del.size() < 400);
  // Bytes that are no UTF-8 reach a terminal as \xNN, never raw.
  const std::string high = error_of(file_with("{\"a\":{\"shape\":[2,\xff\xfe]}}", 0));
  CHECK(high.rfind("h.st: header is not valid JSON: ", 0) == 0);
  CHECK(high.find("\\xff") != std::string::npos);
  CHECK(std::none_of(high.begin(), high.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x80; }));
  CHECK(error_of(file_with("{\"a\":{\"shape\":[[[1]]]}}", 0)) ==
        "h.st: header nests deeper than {name: {key: [sizes]}}");
  // A deep nest is refused where it starts, however deep it goes: nothing recurses on it.
  CHECK(error_of(file_with("{\"a\":{\"shape\":[" + std::string(100000, '[') + "]}}", 0)) ==
        "h.st: header nests deeper than {name: {key: [sizes]}}");
  CHECK(error_of(file_with("{\"a\":[" + std::string(100000, '[') + "]}", 0)) ==
        "h.st: tensor 'a': expected an object {dtype, shape, data_offsets}, got an array");
  CHECK(error_of(file_with(R"({"a":3})", 0)) ==
        "h.st: tensor 'a': expected an object {dtype, shape, data_offsets}, got 3");
  CHECK(error_of(file_with(R"({"a":{"dtype":["F32"]}})", 0)) ==
        "h.st: tensor 'a': dtype must be a string, got an array");
  CHECK(error_of(file_with(R"({"a":{"shape":{"0":1}}})", 0)) ==
        "h.st: tensor 'a': shape must be an array of integers, got an object");
  CHECK(error_of(file_with(R"({"a":{"shape":7}})", 0)) == "h.st: tensor 'a': shape must be an array of sizes");
  CHECK(error_of(file_with(R"({"__metadata__":[]})", 0)) == "h.st: __metadata__ must be an object of strings");
  CHECK(error_of(file_with(R"({"__metadata__":{"k":"v"},"__metadata__":{}})", 0)) ==
        "h.st: duplicate key '__metadata__' in the header");
  CHECK(error_of(file_with("{" + entry("w", "U8", "[1]", 0, 1) + "," + entry("w", "U8", "[1]", 1, 2) + "}", 2)) ==
        "h.st: duplicate key 'w' in the header");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)) ==
        "h.st: duplicate key 'dtype' in the header");
  CHECK(error_of(file_with(R"({"__metadata__":{"k":1}})", 0)) ==
        "h.st: __metadata__ value of 'k' is not a string");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}})", 1)) ==
        "h.st: tensor 'w': unknown key 'x' (expected dtype, shape, data_offsets)");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","shape":[1]}})", 1)) ==
        "h.st: tensor 'w': needs dtype, shape and data_offsets");
  // Trailing spaces pad a header (the reference writer aligns the buffer that way).
  CHECK(error_of(file_with("{" + entry("w", "U8", "[1]", 0, 1) + "}   ", 1)) == "(no error)");
}

TEST_CASE("dtypes, shapes and offsets are checked per tensor, overflow included") {
  CHECK(error_of(file_with("{" + entry("w", "F8_E4M3", "[1]", 0, 1) + "}", 1)) ==
        "h.st: tensor 'w': unsupported dtype 'F8_E4M3' (supported: BOOL, U8, I8, I16, U16, F16, "
        "BF16, I32, U32, F32, I64, U64, F64)");
  CHECK(error_of(file_with("{" + entry("w", "F32", "[-1]", 0, 4) + "}", 4)) ==
        "h.st: tensor 'w': shape entry -1 is not a size (an integer in [0, 2^63))");
  CHECK(error_of(file_with("{" + entry("w", "F32", "[1.5]", 0, 4) + "}", 4)) ==
        "h.st: tensor 'w': shape entry 1.5 is not a size (an integer in [0, 2^63))");
  CHECK(error_of(file_with("{" + entry("w", "F32", "[18446744073709551615]", 0, 4) + "}", 4)) ==
        "h.st: tensor 'w': shape entry 18446744073709551615 is not a size (an integer in [0, 2^63))");
  // 2^32 * 2^32 elements: the count overflows 64 bits.
  CHECK(error_of(file_with("{" + entry("w", "F32", "[4294967296,4294967296]", 0, 4) + "}", 4)) ==
        "h.st: tensor 'w': shape [4294967296, 4294967296] has more bytes than 64 bits can count");
  // 2^62 elements fit, but 4 bytes each do not.
  CHECK(error_of(file_with("{" + entry("w", "F32", "[4611686018427387904]", 0, 4) + "}", 4)) ==
        "h.st: tensor 'w': shape [4611686018427387904] has more bytes than 64 bits can count");
  CHECK(error_of(file_with("{" + entry("w", "F32", "[2,3]", 0, 20) + "}", 20)) ==
        "h.st: tensor 'w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20) hold 20");
  CHECK(error_of(file_with("{" + entry("w", "U8", "[4]", 0, 4) + "}", 2)) ==
        "h.st: tensor 'w': data_offsets [0, 4) lie outside the byte buffer of 2 bytes");
  CHECK(error_of(file_with("{" + entry("w", "U8", "[4]", 8, 4) + "}", 8)) ==
        "h.st: tensor 'w': data_offsets [8, 4] end before they begin");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1)) ==
        "h.st: tensor 'w': data_offsets must be [begin, end], two integers >= 0");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1)) ==
        "h.st: tensor 'w': data_offsets must be [begin, end], two integers >= 0");
  CHECK(error_of(file_with(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,-1]}})", 1)) ==
        "h.st: tensor 'w': data_offsets must be [begin, end], two integers >= 0");
  CHECK(error_of(file_with(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", 1)) ==
        "h.st: tensor 'w': unsupported dtype 7 (supported: BOOL, U8, I8, I16, U16, F16, BF16, "
        "I32, U32, F32, I64, U64, F64)");
  CHECK(error_of(file_with(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8)) ==
        "h.st: tensor 'w': shape entry \"2\" is not a size (an integer in [0, 2^63))");
}

TEST_CASE("a header of many tensors is read in one pass") {
  // 20,000 one-byte tensors, listed in reverse order of their offsets.
  std::string header = "{";
  const int n = 20000;
  for (int i = n - 1; i >= 0; --i) {
    // Appends, not operator+: GCC 12 -O3 warns falsely (-Wrestrict) on the latter here.
    header.append(entry(name_of(i), "U8", "[1]", static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    header.append(i ? "," : "}");
  }
  const st::File f = st::parse(file_with(header, n), "many.st");
  REQUIRE(f.tensors.size() == n);
  for (int i = 0; i < n; i += 997) CHECK(f.tensors[static_cast<size_t>(i)].name == name_of(i));
}

TEST_CASE("the tensors must tile the byte buffer: no overlap, no gap, no tail") {
  const std::string a = entry("a", "U8", "[8]", 0, 8);
  CHECK(error_of(file_with("{" + a + "," + entry("b", "U8", "[8]", 4, 12) + "}", 12)) ==
        "h.st: tensors 'a' [0, 8) and 'b' [4, 12) overlap in the byte buffer");
  CHECK(error_of(file_with("{" + a + "," + entry("b", "U8", "[8]", 0, 8) + "}", 8)) ==
        "h.st: tensors 'a' [0, 8) and 'b' [0, 8) overlap in the byte buffer");
  CHECK(error_of(file_with("{" + a + "," + entry("b", "U8", "[4]", 10, 14) + "}", 14)) ==
        "h.st: bytes [8, 10) of the byte buffer belong to no tensor (before 'b')");
  CHECK(error_of(file_with("{" + a + "}", 9)) ==
        "h.st: bytes [8, 9) at the end of the byte buffer belong to no tensor");
  const auto tail = file_with("{" + a + "}", 9);
  CHECK(error_on_disk(tail) == error_of(tail));
  CHECK(error_of(file_with("{}", 0)) == "(no error)");  // an empty file of tensors is valid
  // Names with control bytes are escaped in messages.
  CHECK(error_of(file_with("{" + entry("\\u0001x", "U8", "[9]", 0, 9) + "}", 8)) ==
        "h.st: tensor '\\x01x': data_offsets [0, 9) lie outside the byte buffer of 8 bytes");
}

// Fuzz target: the IDX reader (tools/data/idx.h), plain and gzip'd, as labels and as images.
//
// Any input either reads or throws brigade::Error with a short, printable message. An input
// that reads must have the rank asked for and exactly product(dims) bytes of data; and a
// plain file that reads must read the same once gzip'd (the two paths agree).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/error.h"
#include "tests/fuzz/fuzz_check.h"
#include "tools/data/idx.h"

namespace data = brigade::data;
using brigade::fuzz::require;

namespace {

std::optional<data::IdxArray> read(std::span<const uint8_t> bytes, int rank) {
  try {
    return data::parse_idx(bytes, "fuzz.idx", rank);
  } catch (const brigade::Error& e) {
    brigade::fuzz::check_message(e.what(), 1024);
    return std::nullopt;
  }
}

// `bytes` as one gzip member.
std::vector<uint8_t> gzip(std::span<const uint8_t> bytes) {
  z_stream z{};
  require(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK,
          "deflateInit2");
  std::vector<uint8_t> out(deflateBound(&z, bytes.size()));
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  require(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate finishes");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::span<const uint8_t> input(bytes, size);
  const bool plain = !(size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b);
  for (int rank : {1, 3}) {
    const std::optional<data::IdxArray> a = read(input, rank);
    if (!a) continue;
    require(a->dims.size() == static_cast<size_t>(rank), "the rank asked for");
    uint64_t count = 1;
    for (uint32_t d : a->dims) count *= d;  // the reader bounded the product
    require(a->data.size() == count, "product(dims) bytes of data");
    if (plain) {
      const std::vector<uint8_t> packed = gzip(input);
      const std::optional<data::IdxArray> b = read(packed, rank);
      require(b && b->dims == a->dims && b->data == a->data, "gzip'd, the same file reads the same");
    }
  }
  return 0;
}

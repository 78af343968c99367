// IDX: the file format of MNIST and Fashion-MNIST, read plain or gzip-compressed.
//
//   bytes [0, 4)          magic: 0x00 0x00, the element type, the number of dimensions
//   bytes [4, 4 + 4r)     r dimensions, unsigned 32-bit big-endian
//   bytes [4 + 4r, end)   the elements, row-major, exactly the product of the dimensions
//
// Brigade reads the two kinds a classifier data set needs, both of unsigned bytes (type 0x08):
//   0x00000801  labels  (count)
//   0x00000803  images  (count, rows, cols)
// Every other element type (0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64) and
// every other dimension count is refused as unsupported, with a message that says so.
//
// Compression is detected by the gzip magic bytes (0x1f 0x8b), never by the file name, and the
// gzip stream is inflated as it is read: nothing larger than the data the header declares is
// ever held in memory. The reader trusts nothing in the file (it is fuzzed): the product of the
// dimensions is overflow-checked and bounded before anything is allocated (by the file size for
// a plain file, by deflate's maximum ratio for a gzip file, and by `max_data_bytes` for both),
// and the data must end exactly where the header says: a short file is "truncated", a longer
// one has "trailing data". A gzip'd file whose header or length is refused is inflated to its
// end first: if its CRC-32 or length fails, it is a "corrupt gzip stream" (a damaged download
// inflates to bytes that disagree with themselves). Every error is a brigade::Error whose
// message starts with "IDX file '<name>': ".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brigade::data {

// An IDX file's contents.
struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;   // product(dims) bytes, row-major
};

// The default bound on the data of one file: 4 GiB, far above Fashion-MNIST's 47 MB (the
// training images) and below what a file may claim (a 1e12-image header is refused).
inline constexpr uint64_t kIdxMaxDataBytes = uint64_t{4} << 30;

// Deflate's best case: one 258-byte match per ~2 bits, so a gzip stream of S bytes inflates to
// at most about 1032 * S bytes. A header claiming more than this is refused before allocating.
inline constexpr uint64_t kDeflateMaxRatio = 1032;

// Reads the IDX file at `path` (plain or gzip) whose dimension count must be `rank`: 1 for
// labels (magic 0x00000801), 3 for images (magic 0x00000803).
IdxArray read_idx_file(const std::string& path, int rank,
                       uint64_t max_data_bytes = kIdxMaxDataBytes);

// The same, from bytes in memory (plain or gzip); `name` is used in messages. The entry point
// of the fuzz target.
IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& name, int rank,
                   uint64_t max_data_bytes = kIdxMaxDataBytes);

}  // namespace brigade::data

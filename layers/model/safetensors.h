// Safetensors: the Hugging Face file format for named tensors, read and written safely.
//
//   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    a JSON object: {"conv2d_1.weight": {"dtype": "F32", "shape": [32, 1,
//                       3, 3], "data_offsets": [0, 1152]}, ..., "__metadata__": {"k": "v"}}
//   bytes [8 + N, end)  the byte buffer; data_offsets are relative to its start, row-major,
//                       little-endian, and the tensors tile it exactly (no gap, no overlap)
//
// Brigade stores a model's parameters under PyTorch's names and layouts (`<layer>.weight`,
// `<layer>.bias`; conv OIHW, dense (out, in)) so torch's load_state_dict takes them after a
// name map. This file knows nothing of Tensor: it moves bytes, shapes and dtypes.
//
// The reader trusts nothing in the file (it is fuzzed): the header length is bounded before
// anything is allocated, the JSON nesting depth is bounded, every size is overflow-checked,
// and the whole header is validated against the file size before the data is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"

namespace brigade::safetensors {

// The dtypes Brigade reads and writes (the spec's names). Sub-byte and 8-bit float types
// of newer files are refused as unsupported.
enum class Dtype { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };

size_t dtype_size(Dtype dtype);             // bytes per element
std::string_view dtype_name(Dtype dtype);   // "F32"
std::optional<Dtype> parse_dtype(std::string_view name);

// The spec's (and the reference implementation's) bound on the header: larger headers are
// refused before they are read, so a file cannot make us allocate or parse more than this.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A malformed or mismatching file; what() names the file and, where one is at fault, the
// tensor. A brigade::Error, as a failed write is (engine/output_file.h).
class Error : public brigade::Error {
 public:
  using brigade::Error::Error;
};

// One tensor to write: its bytes are dtype_size * product(shape), row-major little-endian.
struct TensorToWrite {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
};

// One tensor of a file that has been read.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data buffer
};

struct File {
  std::string source;                           // path (or label) used in messages
  std::vector<TensorInfo> tensors;              // in data-offset order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<uint8_t> data;                    // the byte buffer

  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  std::span<const uint8_t> bytes(const TensorInfo& tensor) const;
};

// Writes `tensors` (in this order) and `metadata` to `path` atomically: to
// `path.tmp.<pid>`, fsync, rename over `path`, fsync the directory (brigade::WholeFile). A
// tensor that does not fit its shape throws Error before anything is written; a failed
// write, fsync, close or rename throws brigade::Error naming `path` and the system's reason.
// Either way the temporary file is removed and `path` is left as it was.
void write_file(const std::string& path, std::span<const TensorToWrite> tensors,
                const std::map<std::string, std::string>& metadata = {});

// Reads and validates the file at `path`. Throws Error.
File read_file(const std::string& path);
// The same checks and answer without the tensors' bytes (`data` stays empty; bytes() is not
// for such a File): the header alone is read, its byte ranges checked against the file's size,
// for a look at a file's metadata or shapes that need not read its gigabytes.
File read_header(const std::string& path);

// Validates and parses a whole file already in memory; `source` names it in messages.
File parse(std::span<const uint8_t> file_bytes, std::string_view source);

// What a model expects to find in a file.
struct Expected {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
};

// The size in bytes of the file write_file writes for tensors of these names, dtypes and
// shapes (in this order) and this metadata, exactly: what a file system must have free for it.
// Throws Error as write_file would for a name or shape it refuses.
uint64_t file_size(std::span<const Expected> tensors,
                   const std::map<std::string, std::string>& metadata = {});

// Every difference between `file` and `expected` (missing, unexpected, wrong shape, wrong
// dtype), one per entry, in expected order then file order. Empty when they agree.
std::vector<std::string> mismatches(const File& file, std::span<const Expected> expected);

// Throws one Error listing every mismatch, or returns when there is none.
void check(const File& file, std::span<const Expected> expected);

}  // namespace brigade::safetensors

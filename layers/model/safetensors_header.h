// Internal to safetensors_read.cpp: the JSON header parsed into plain entries.
//
// A SAX handler, not a DOM: it keeps only what a safetensors header may hold, refuses any
// other structure as soon as it appears (so nesting is bounded at {name: {key: [sizes]}}
// and nothing recurses), and catches duplicate keys that a map would silently merge.
// nlohmann's parser with a callback is not used: its end_object scans the whole parent
// object, which makes a header of many tensors quadratic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::safetensors::detail {

struct RawEntry {
  std::string name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  bool dtype_is_string = false;
  std::string dtype;             // the text, when it is a string
  std::vector<uint64_t> shape;   // each < 2^63 (checked while parsing)
  std::vector<uint64_t> offsets; // at most 2 (checked while parsing)
};

struct RawHeader {
  std::vector<RawEntry> entries;  // in file order
  std::map<std::string, std::string> metadata;
};

// Throws Error naming `source` (and the tensor, where one is at fault).
RawHeader parse_header_json(std::string_view header, const std::string& source);

// A name from the file as it appears in a message: quoted, control bytes escaped, cut short.
std::string shown(std::string_view s);
// Text from the file for a message: bytes below 0x20 and 0x7f as \xNN, at most max_bytes.
std::string escaped(std::string_view s, size_t max_bytes);

}  // namespace brigade::safetensors::detail

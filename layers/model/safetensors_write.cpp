// Writing safetensors atomically, and checking a file against what a model expects.
//
// A checkpoint must never be half-written over a good one: WholeFile (engine/output_file.h)
// writes the bytes to `path.tmp.<pid>`, fsyncs them, and only then renames them over `path`
// (rename is atomic on POSIX file systems), then fsyncs the directory so the rename itself
// survives a crash.
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/output_file.h"
#include "layers/model/checked_math.h"
#include "layers/model/safetensors.h"
#include "layers/model/safetensors_header.h"

namespace brigade::safetensors {

namespace {

std::string dims_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The 8-byte length and the JSON header of a file of `tensors` (names, dtypes and shapes, in
// this order) and `metadata`, padded with spaces to a multiple of 8 bytes (as the reference
// writer does) so the byte buffer starts 8-byte aligned. `sizes` gets each tensor's bytes.
std::string header_bytes(const std::string& path, std::span<const Expected> tensors,
                         const std::map<std::string, std::string>& metadata,
                         std::vector<uint64_t>& sizes) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const Expected& t : tensors) {
    const std::string who = path + ": tensor '" + t.name + "'";
    if (t.name == "__metadata__") throw Error(who + ": the name is reserved by the format");
    if (!names.insert(t.name).second) throw Error(who + ": written twice");
    std::optional<uint64_t> bytes = uint64_t{dtype_size(t.dtype)};
    for (int64_t d : t.shape) {
      if (d < 0) throw Error(who + ": negative size in shape " + dims_text(t.shape));
      if (bytes) bytes = checked::mul(*bytes, static_cast<uint64_t>(d));
    }
    if (!bytes) throw Error(who + ": shape " + dims_text(t.shape) + " needs more than 2^64 bytes");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
    sizes.push_back(*bytes);
  }
  std::string text;
  try {
    text = header.dump();  // throws on a name or metadata string that is not valid UTF-8
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": cannot encode the header: " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace

void write_file(const std::string& path, std::span<const TensorToWrite> tensors,
                const std::map<std::string, std::string>& metadata) {
  std::vector<Expected> layout;
  for (const TensorToWrite& t : tensors) layout.push_back({t.name, t.dtype, t.shape});
  std::vector<uint64_t> sizes;
  const std::string head = header_bytes(path, layout, metadata, sizes);  // before any I/O
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].bytes.size() != sizes[i])
      throw Error(path + ": tensor '" + tensors[i].name + "': shape " + dims_text(tensors[i].shape) +
                  " of " + std::string(dtype_name(tensors[i].dtype)) + " needs " +
                  std::to_string(sizes[i]) + " bytes but " + std::to_string(tensors[i].bytes.size()) +
                  " were given");
  WholeFile file(path);  // a temporary, renamed over `path` once whole (engine/output_file.h)
  file.write(head);
  for (const TensorToWrite& t : tensors) file.write(t.bytes);
  file.commit();
}

uint64_t file_size(std::span<const Expected> tensors,
                   const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  uint64_t total = header_bytes("(a file's size)", tensors, metadata, sizes).size();
  for (uint64_t bytes : sizes) total += bytes;
  return total;
}

std::vector<std::string> mismatches(const File& file, std::span<const Expected> expected) {
  std::vector<std::string> out;
  std::set<std::string_view> wanted;
  for (const Expected& e : expected) {
    wanted.insert(e.name);
    const TensorInfo* t = file.find(e.name);
    if (!t) {
      out.push_back("missing tensor " + detail::shown(e.name) + " (expected " +
                    std::string(dtype_name(e.dtype)) + " " + dims_text(e.shape) + ")");
      continue;
    }
    if (t->dtype != e.dtype)
      out.push_back("tensor " + detail::shown(e.name) + ": dtype " + std::string(dtype_name(t->dtype)) +
                    ", expected " + std::string(dtype_name(e.dtype)));
    if (t->shape != e.shape)
      out.push_back("tensor " + detail::shown(e.name) + ": shape " + dims_text(t->shape) + ", expected " +
                    dims_text(e.shape));
  }
  for (const TensorInfo& t : file.tensors)
    if (!wanted.count(t.name))
      out.push_back("unexpected tensor " + detail::shown(t.name) + " (" + std::string(dtype_name(t.dtype)) +
                    " " + dims_text(t.shape) + ")");
  return out;
}

void check(const File& file, std::span<const Expected> expected) {
  const std::vector<std::string> found = mismatches(file, expected);
  if (found.empty()) return;
  std::string message = file.source + ": " + std::to_string(found.size()) +
                        (found.size() == 1 ? " mismatch" : " mismatches") + " with the model:";
  for (const std::string& m : found) message += "\n  " + m;
  throw Error(message);
}

}  // namespace brigade::safetensors

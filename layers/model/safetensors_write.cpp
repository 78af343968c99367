// Writing safetensors atomically, and checking a file against what a model expects.
//
// A checkpoint must never be half-written over a good one: the bytes go to
// `path.tmp.<pid>`, are fsync'ed, and only then renamed over `path` (rename is atomic on
// POSIX file systems); the directory is fsync'ed so the rename itself survives a crash.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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

// Writes all of `bytes` to fd, retrying short writes; false with errno set on failure.
bool write_all(int fd, const uint8_t* bytes, size_t count) {
  while (count > 0) {
    const ssize_t put = ::write(fd, bytes, count);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    bytes += put;
    count -= static_cast<size_t>(put);
  }
  return true;
}

// The 8-byte length and the JSON header, padded with spaces to a multiple of 8 bytes (as
// the reference writer does) so the byte buffer starts 8-byte aligned.
std::string header_bytes(const std::string& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const std::string who = path + ": tensor '" + t.name + "'";
    if (t.name == "__metadata__") throw Error(who + ": the name is reserved by the format");
    if (!names.insert(t.name).second) throw Error(who + ": written twice");
    std::optional<uint64_t> bytes = uint64_t{dtype_size(t.dtype)};
    for (int64_t d : t.shape) {
      if (d < 0) throw Error(who + ": negative size in shape " + dims_text(t.shape));
      if (bytes) bytes = checked::mul(*bytes, static_cast<uint64_t>(d));
    }
    if (!bytes || *bytes != t.bytes.size())
      throw Error(who + ": shape " + dims_text(t.shape) + " of " + std::string(dtype_name(t.dtype)) +
                  " needs " + (bytes ? std::to_string(*bytes) : std::string("more than 2^64")) +
                  " bytes but " + std::to_string(t.bytes.size()) + " were given");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
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

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void write_file(const std::string& path, std::span<const TensorToWrite> tensors,
                const std::map<std::string, std::string>& metadata) {
  const std::string head = header_bytes(path, tensors, metadata);  // validates before any I/O
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot create '" + tmp + "' to write " + path + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + " failed while writing '" + tmp + "': " + std::strerror(saved) +
                " (the previous file, if any, is untouched)");
  };
  if (!write_all(fd, reinterpret_cast<const uint8_t*>(head.data()), head.size())) fail("write");
  for (const TensorToWrite& t : tensors)
    if (!write_all(fd, t.bytes.data(), t.bytes.size())) fail("write");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": close failed while writing '" + tmp + "': " + std::strerror(saved));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(saved));
  }
  // Make the rename durable. Best effort: the new file is already complete and in place,
  // and some file systems refuse fsync on a directory.
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
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

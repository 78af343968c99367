// Reading safetensors: validate everything, then copy the bytes.
//
// Order of the checks: the 8-byte length against the file and kMaxHeaderBytes; the JSON
// (nesting at most {name: {key: [numbers]}}, no duplicate keys); every tensor's dtype, shape
// and offsets (overflow-checked); then that the tensors tile the byte buffer exactly. Only
// then is the buffer read, and its size is then the sum of sizes the header declared.
#include "layers/model/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "layers/model/checked_math.h"
#include "layers/model/safetensors_header.h"

namespace brigade::safetensors {

namespace {

using detail::shown;

constexpr std::array<std::pair<Dtype, std::string_view>, 13> kDtypes = {{
    {Dtype::BOOL, "BOOL"}, {Dtype::U8, "U8"},   {Dtype::I8, "I8"},     {Dtype::I16, "I16"},
    {Dtype::U16, "U16"},   {Dtype::F16, "F16"}, {Dtype::BF16, "BF16"}, {Dtype::I32, "I32"},
    {Dtype::U32, "U32"},   {Dtype::F32, "F32"}, {Dtype::I64, "I64"},   {Dtype::U64, "U64"},
    {Dtype::F64, "F64"},
}};

std::string dims_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string range_text(uint64_t begin, uint64_t end) {
  char buf[64];  // snprintf, not string +: GCC 12 -O3 warns falsely (-Wrestrict) on the latter
  std::snprintf(buf, sizeof buf, "[%llu, %llu)", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end));
  return buf;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The header length must fit the bound and the file: checked before the header is read.
void check_header_length(uint64_t n, uint64_t file_size, const std::string& source) {
  if (file_size < 8)
    throw Error(source + ": only " + std::to_string(file_size) +
                " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  if (n > kMaxHeaderBytes)
    throw Error(source + ": header length " + std::to_string(n) + " is larger than the " +
                std::to_string(kMaxHeaderBytes) + "-byte limit");
  if (n > file_size - 8)
    throw Error(source + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                std::to_string(file_size - 8) + " bytes follow the length field)");
}

// One tensor entry of the header, checked on its own.
TensorInfo check_entry(detail::RawEntry& raw, uint64_t buffer_size, const std::string& source) {
  const std::string who = source + ": tensor " + shown(raw.name);
  auto fail = [&](const std::string& what) { throw Error(who + ": " + what); };
  if (!raw.has_dtype || !raw.has_shape || !raw.has_offsets) fail("needs dtype, shape and data_offsets");

  TensorInfo t;
  t.name = std::move(raw.name);
  const std::optional<Dtype> d = raw.dtype_is_string ? parse_dtype(raw.dtype) : std::nullopt;
  if (!d) {
    std::string supported;
    for (const auto& [_, n] : kDtypes) supported += (supported.empty() ? "" : ", ") + std::string(n);
    fail("unsupported dtype " + (raw.dtype_is_string ? shown(raw.dtype) : raw.dtype) +
         " (supported: " + supported + ")");
  }
  t.dtype = *d;

  // Each size is below 2^63 (the parser checked); their product may still overflow.
  std::optional<uint64_t> elements = uint64_t{1};
  for (uint64_t dim : raw.shape) {
    t.shape.push_back(static_cast<int64_t>(dim));
    if (elements) elements = checked::mul(*elements, dim);
  }
  const auto bytes = elements ? checked::mul(*elements, uint64_t{dtype_size(t.dtype)}) : std::nullopt;
  if (!bytes) fail("shape " + dims_text(t.shape) + " has more bytes than 64 bits can count");

  t.begin = raw.offsets[0];  // exactly two: the parser checked
  t.end = raw.offsets[1];
  if (t.end < t.begin)
    fail("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
         "] end before they begin");
  if (t.end > buffer_size)
    fail("data_offsets " + range_text(t.begin, t.end) + " lie outside the byte buffer of " +
         std::to_string(buffer_size) + " bytes");
  if (t.end - t.begin != *bytes)
    fail("shape " + dims_text(t.shape) + " of " + std::string(dtype_name(t.dtype)) + " needs " +
         std::to_string(*bytes) + " bytes but data_offsets " + range_text(t.begin, t.end) +
         " hold " + std::to_string(t.end - t.begin));
  return t;
}

// The JSON header -> tensors (sorted by offset) and metadata, checked against the buffer.
File parse_header(std::string_view header, uint64_t buffer_size, const std::string& source) {
  detail::RawHeader raw = detail::parse_header_json(header, source);
  File file;
  file.source = source;
  file.metadata = std::move(raw.metadata);
  for (detail::RawEntry& entry : raw.entries)
    file.tensors.push_back(check_entry(entry, buffer_size, source));

  // The tensors must tile [0, buffer_size) exactly: in offset order, each begins where the
  // previous one ends. (A zero-size tensor occupies no bytes and fits anywhere in order.)
  std::sort(file.tensors.begin(), file.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : file.tensors) {
    if (t.begin < covered)
      throw Error(source + ": tensors " + shown(previous->name) + " " +
                  range_text(previous->begin, previous->end) + " and " + shown(t.name) + " " +
                  range_text(t.begin, t.end) + " overlap in the byte buffer");
    if (t.begin > covered)
      throw Error(source + ": bytes " + range_text(covered, t.begin) +
                  " of the byte buffer belong to no tensor (before " + shown(t.name) + ")");
    covered = t.end;
    if (t.end > t.begin) previous = &t;
  }
  if (covered != buffer_size)
    throw Error(source + ": bytes " + range_text(covered, buffer_size) +
                " at the end of the byte buffer belong to no tensor");
  return file;
}

}  // namespace

size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::BOOL: case Dtype::U8: case Dtype::I8: return 1;
    case Dtype::I16: case Dtype::U16: case Dtype::F16: case Dtype::BF16: return 2;
    case Dtype::I32: case Dtype::U32: case Dtype::F32: return 4;
    case Dtype::I64: case Dtype::U64: case Dtype::F64: return 8;
  }
  return 0;
}

std::string_view dtype_name(Dtype dtype) {
  for (const auto& [d, name] : kDtypes)
    if (d == dtype) return name;
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const auto& [d, n] : kDtypes)
    if (n == name) return d;
  return std::nullopt;
}

const TensorInfo* File::find(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> File::bytes(const TensorInfo& tensor) const {
  return std::span<const uint8_t>(data).subspan(tensor.begin, tensor.end - tensor.begin);
}

File parse(std::span<const uint8_t> file_bytes, std::string_view source_name) {
  const std::string source(source_name);
  const uint64_t size = file_bytes.size();
  check_header_length(size >= 8 ? read_le64(file_bytes.data()) : 0, size, source);
  const uint64_t n = read_le64(file_bytes.data());
  const std::string_view header(reinterpret_cast<const char*>(file_bytes.data()) + 8, n);
  File file = parse_header(header, size - 8 - n, source);
  file.data.assign(file_bytes.begin() + static_cast<ptrdiff_t>(8 + n), file_bytes.end());
  return file;
}

namespace {

// read_file and read_header: the whole file, or its header alone (`with_data` false).
File read(const std::string& path, bool with_data) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open safetensors file '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  // Reads exactly `count` bytes into `out`, or throws.
  auto read_exact = [&](uint8_t* out, uint64_t count) {
    while (count > 0) {
      const ssize_t got = ::read(fd, out, std::min<uint64_t>(count, uint64_t{1} << 30));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error(path + ": read failed: " + std::strerror(errno));
      if (got == 0) throw Error(path + ": the file ended early (did it change while being read?)");
      out += got;
      count -= static_cast<uint64_t>(got);
    }
  };

  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint8_t length[8] = {};
  if (size >= 8) read_exact(length, 8);
  const uint64_t n = read_le64(length);
  check_header_length(n, size, path);
  std::string header(n, '\0');  // n <= kMaxHeaderBytes and <= the file: a bounded allocation
  read_exact(reinterpret_cast<uint8_t*>(header.data()), n);
  File file = parse_header(header, size - 8 - n, path);
  if (!with_data) return file;
  file.data.resize(size - 8 - n);  // exactly what the validated header declares
  read_exact(file.data.data(), file.data.size());
  return file;
}

}  // namespace

File read_file(const std::string& path) { return read(path, true); }
File read_header(const std::string& path) { return read(path, false); }

}  // namespace brigade::safetensors

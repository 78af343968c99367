// The IDX reader: raw bytes (a file or memory) -> payload (the bytes, or their inflation) ->
// header checks -> data. Read top to bottom: the two raw inputs, the payload, then parse().
#include "tools/data/idx.h"

#include <zlib.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "engine/error.h"

namespace brigade::data {
namespace {

constexpr size_t kChunk = size_t{1} << 16;           // raw bytes read at a time
constexpr uint64_t kFirstGrowth = uint64_t{1} << 24;  // first allocation for gzip'd data

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw Error("IDX file '" + name + "': " + what);
}

// ---- Raw input: where the (possibly compressed) bytes come from ------------------------------

class RawInput {
 public:
  virtual ~RawInput() = default;
  virtual size_t read(uint8_t* dst, size_t n) = 0;  // fewer than n only at the end
  virtual uint64_t size() const = 0;                // all bytes, known before reading
};

class FileInput final : public RawInput {
 public:
  explicit FileInput(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fclose(file_);
      fail(path, "is not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileInput() override { std::fclose(file_); }
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;

  size_t read(uint8_t* dst, size_t n) override {
    const size_t got = std::fread(dst, 1, n, file_);
    if (got < n && std::ferror(file_)) fail(path_, std::string("read error: ") + std::strerror(errno));
    return got;
  }
  uint64_t size() const override { return size_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

class MemoryInput final : public RawInput {
 public:
  explicit MemoryInput(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t read(uint8_t* dst, size_t n) override {
    const size_t got = std::min(n, bytes_.size() - pos_);
    if (got > 0) std::memcpy(dst, bytes_.data() + pos_, got);
    pos_ += got;
    return got;
  }
  uint64_t size() const override { return bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// ---- Payload: the IDX bytes themselves, inflated on the fly when the input is gzip'd ---------

class Payload {
 public:
  Payload(RawInput& raw, const std::string& name) : raw_(raw), name_(name), in_(kChunk) {
    refill();  // the first bytes tell plain from gzip
    gzip_ = in_len_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_) {
      // 16 + MAX_WBITS: expect a gzip wrapper; inflate then checks its CRC-32 and length.
      if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail(name_, "zlib could not start inflating");
      z_.next_in = in_.data();
      z_.avail_in = static_cast<uInt>(in_len_);
    }
  }
  ~Payload() {
    if (gzip_) inflateEnd(&z_);
  }
  Payload(const Payload&) = delete;
  Payload& operator=(const Payload&) = delete;

  bool gzip() const { return gzip_; }

  // Reads up to n payload bytes; fewer only at the end of the payload.
  size_t read(uint8_t* dst, size_t n) { return gzip_ ? inflate_into(dst, n) : copy_into(dst, n); }

  // True when no payload byte is left (and, for gzip, the stream ended cleanly).
  bool at_end() {
    uint8_t byte;
    return read(&byte, 1) == 0;
  }

  // For a gzip stream not yet at its end: inflates the rest (at most `limit` bytes, thrown
  // away), so that its CRC-32 and length are checked, and throws if the stream is corrupt or
  // cut short. Called when the header or the length is refused: in a gzip'd file that is
  // more likely a damaged stream than a file that means what it says.
  void check_rest(uint64_t limit) {
    if (!gzip_ || stream_end_ || broken_) return;
    std::vector<uint8_t> scratch(kChunk);
    for (uint64_t done = 0; done < limit && !stream_end_;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, limit - done));
      done += inflate_into(scratch.data(), want);
    }
  }

 private:
  // Loads the next raw bytes into in_; false when the raw input is exhausted.
  bool refill() {
    in_pos_ = 0;
    in_len_ = raw_.read(in_.data(), in_.size());
    return in_len_ > 0;
  }

  size_t copy_into(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (in_pos_ == in_len_ && !refill()) break;
      const size_t take = std::min(n - done, in_len_ - in_pos_);
      std::memcpy(dst + done, in_.data() + in_pos_, take);
      in_pos_ += take;
      done += take;
    }
    return done;
  }

  [[noreturn]] void fail_stream(const std::string& what) {
    broken_ = true;
    fail(name_, what);
  }

  size_t inflate_into(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n && !stream_end_) {
      if (z_.avail_in == 0) {
        if (!refill()) {
          fail_stream("truncated gzip stream: the compressed data ends after " +
                      std::to_string(z_.total_out) + " decompressed bytes, before its end marker");
        }
        z_.next_in = in_.data();
        z_.avail_in = static_cast<uInt>(in_len_);
      }
      const size_t want = std::min<size_t>(n - done, std::numeric_limits<uInt>::max());
      z_.next_out = dst + done;
      z_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      done += want - z_.avail_out;
      if (rc == Z_STREAM_END) {
        stream_end_ = true;
        // One gzip member, then nothing: concatenated members are refused like any other tail.
        if (z_.avail_in > 0 || refill()) {
          fail_stream("trailing bytes after the end of the gzip stream "
                      "(multi-member gzip files are not supported)");
        }
      } else if (rc == Z_BUF_ERROR && z_.avail_in == 0) {
        continue;  // no progress without more input: the loop refills
      } else if (rc != Z_OK) {
        fail_stream(std::string("corrupt gzip stream (zlib: ") + (z_.msg ? z_.msg : zError(rc)) +
                    ")");
      }
    }
    return done;
  }

  RawInput& raw_;
  const std::string& name_;
  std::vector<uint8_t> in_;  // raw bytes read and not yet consumed: [in_pos_, in_len_)
  size_t in_pos_ = 0, in_len_ = 0;
  bool gzip_ = false;
  bool stream_end_ = false;
  bool broken_ = false;  // the stream itself was refused (corrupt, cut short, a second member)
  z_stream z_{};
};

// ---- The header and the data ----------------------------------------------------------------

uint32_t big_endian_u32(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

const char* element_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

std::string hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*X", digits, value);
  return text;
}

const char* kind_of_rank(int rank) {
  return rank == 1 ? "labels, count" : "images, count x rows x cols";
}

std::string dimensions(int n) { return std::to_string(n) + (n == 1 ? " dimension" : " dimensions"); }

IdxArray parse_payload(Payload& in, uint64_t raw_size, const std::string& name, int rank,
                       uint64_t max_data_bytes) {
  // Magic: 0x00 0x00 <element type> <number of dimensions>.
  uint8_t magic[4];
  const size_t got_magic = in.read(magic, 4);
  if (got_magic < 4) {
    fail(name, "truncated: " + std::to_string(got_magic) +
                   " bytes, too short for the 4-byte IDX magic number");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail(name, "bad magic number " + hex(big_endian_u32(magic), 8) +
                   ": an IDX file starts with two zero bytes, its element type and its number of "
                   "dimensions (is this an IDX file?)");
  }
  if (magic[2] != 0x08) {
    fail(name, "element type " + hex(magic[2], 2) + " (" + element_type_name(magic[2]) +
                   ") is not supported: Brigade reads IDX files of unsigned bytes (type 0x08)");
  }
  if (magic[3] != rank) {
    fail(name, "has " + dimensions(magic[3]) + " (magic " + hex(big_endian_u32(magic), 8) +
                   "), expected " + dimensions(rank) + " (magic " +
                   hex(0x800u + static_cast<uint32_t>(rank), 8) + ": " + kind_of_rank(rank) + ")");
  }

  // Dimensions, and their product checked for overflow and bounded before any allocation.
  uint8_t dim_bytes[12];
  const size_t want_dims = 4 * static_cast<size_t>(rank);
  const size_t got_dims = in.read(dim_bytes, want_dims);
  if (got_dims < want_dims) {
    fail(name, "truncated: the header ends after " + std::to_string(got_dims) + " of its " +
                   std::to_string(want_dims) + " dimension bytes");
  }
  IdxArray out;
  std::string shape;  // "60000 x 28 x 28", for messages
  uint64_t bytes = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    const uint32_t d = big_endian_u32(dim_bytes + 4 * i);
    out.dims.push_back(d);
    shape += (i ? " x " : "") + std::to_string(d);
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / d) overflow = true;
    if (!overflow) bytes *= d;
  }
  if (overflow) {
    fail(name, "the dimensions " + shape + " declare more than 2^64 bytes of data (overflow)");
  }
  // "60000 x 28 x 28 = 47040000 bytes", or "60000 bytes" for one dimension.
  const std::string declared = (rank > 1 ? shape + " = " : "") + std::to_string(bytes) + " bytes";
  const std::string memory = "would need " + format_bytes(bytes) + " of memory";
  if (bytes > max_data_bytes) {
    fail(name, "the header declares " + declared + " of data, which " + memory +
                   ", more than the limit of " + format_bytes(max_data_bytes));
  }
  const uint64_t header_bytes = 4 + want_dims;
  if (in.gzip()) {
    const uint64_t most = raw_size > max_data_bytes / kDeflateMaxRatio
                              ? max_data_bytes
                              : raw_size * kDeflateMaxRatio;
    if (bytes > most) {
      fail(name, "the header declares " + declared + " of data (" + memory + "), more than a " +
                     std::to_string(raw_size) + "-byte gzip file can hold (at most " +
                     std::to_string(most) + " bytes): truncated or corrupt");
    }
  } else {
    // The header was read, so the size covers it, unless the file changed since it was opened.
    const uint64_t held = raw_size >= header_bytes ? raw_size - header_bytes : 0;
    if (bytes > held) {
      fail(name, "truncated: the header declares " + declared + " of data (" + memory +
                     ") but the file holds only " + std::to_string(held) + " bytes after its header");
    }
    if (bytes < held) {
      fail(name, "trailing data: the file holds " + std::to_string(held) +
                     " bytes after its header, but the header declares " + declared);
    }
  }

  // The data. A plain file's size is known, so allocate it at once; a gzip'd one grows with
  // what actually inflates (at most twice that), so a lying header costs little memory.
  out.data.resize(in.gzip() ? std::min(bytes, kFirstGrowth) : bytes);
  uint64_t filled = 0;
  while (filled < bytes) {
    if (filled == out.data.size()) out.data.resize(std::min(bytes, 2 * filled));
    const size_t want = static_cast<size_t>(std::min<uint64_t>(out.data.size() - filled, 16 * kChunk));
    const size_t got = in.read(out.data.data() + filled, want);
    filled += got;
    if (got < want) {
      fail(name, "truncated: the data ends after " + std::to_string(filled) + " of the " +
                     declared + " the header declares");
    }
  }
  if (!in.at_end()) fail(name, "trailing data after the " + declared + " the header declares");
  return out;
}

// A gzip'd file whose header and data disagree is first checked whole: one damaged byte in
// the middle of a download inflates to other bytes (more data than declared, another
// header), and the stream's CRC-32 then says "corrupt" where the IDX checks alone would say
// "trailing data".
IdxArray parse(RawInput& raw, const std::string& name, int rank, uint64_t max_data_bytes) {
  BRIGADE_CHECK(rank == 1 || rank == 3,
                "IDX reader: rank must be 1 (labels) or 3 (images), got " << rank);
  Payload in(raw, name);
  try {
    return parse_payload(in, raw.size(), name, rank, max_data_bytes);
  } catch (const Error&) {
    in.check_rest(max_data_bytes);  // throws instead when the stream is damaged
    throw;
  }
}

}  // namespace

IdxArray read_idx_file(const std::string& path, int rank, uint64_t max_data_bytes) {
  FileInput raw(path);
  return parse(raw, path, rank, max_data_bytes);
}

IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& name, int rank,
                   uint64_t max_data_bytes) {
  MemoryInput raw(bytes);
  return parse(raw, name, rank, max_data_bytes);
}

}  // namespace brigade::data

// Hand-made IDX files for the data tests: bytes built field by field, gzip'd with zlib, written
// into a fresh temporary directory that is removed when the test ends.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace brigade::testing {

using Bytes = std::vector<uint8_t>;

inline void put_u32_be(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// An IDX file: magic 0x0000 08 <rank>, the dimensions, then `data` as given (which a test may
// make shorter or longer than the dimensions say).
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t type = 0x08) {
  Bytes out = {0x00, 0x00, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_u32_be(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// `bytes` compressed as one gzip member (zlib's deflate with a gzip wrapper).
inline Bytes gzip(const Bytes& bytes) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  Bytes out(deflateBound(&z, bytes.size()));
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}

// A temporary directory, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("brigade-data-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `bytes` to <dir>/<name> and returns the path.
  std::string write(const std::string& name, const Bytes& bytes) const {
    const std::string file = (path_ / name).string();
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + file);
    return file;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace brigade::testing

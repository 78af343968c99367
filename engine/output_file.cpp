#include "engine/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "engine/error.h"

namespace brigade {

namespace {

// Writes all of `bytes` to fd, retrying short writes (a write may stop at the last free
// block, the next one then says why) and interrupted ones; false with errno set on failure.
bool write_all(int fd, const unsigned char* bytes, size_t count) {
  while (count > 0) {
    const ssize_t put = ::write(fd, bytes, count);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return false;
    if (put == 0) {  // no progress and no reason given: report it as the disk being full
      errno = ENOSPC;
      return false;
    }
    bytes += put;
    count -= static_cast<size_t>(put);
  }
  return true;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A device or a pipe (not a regular file, not a directory, which open refuses by itself).
bool is_special(const std::string& path) {
  struct stat s {};
  return ::stat(path.c_str(), &s) == 0 && !S_ISREG(s.st_mode) && !S_ISDIR(s.st_mode);
}

// The file that `path` names: a symbolic link's target (so that the link keeps pointing where
// it did, at the new file), else `path` itself (a dangling link is replaced by the file).
std::string target_of(const std::string& path) {
  struct stat s {};
  if (::lstat(path.c_str(), &s) != 0 || !S_ISLNK(s.st_mode)) return path;
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

// ---- The temporaries being written, as a signal handler can read them -----------------------
//
// A fixed table of slots, each a state and a path. A writer fills a free slot, then arms it; a
// handler takes an armed slot with one compare-and-swap, removes the file and marks it
// removed; the writer frees its slot when armed or removed, never while a handler reads the
// path (taken), so that no path is rewritten under a handler.
enum SlotState : int { kFree, kFilling, kArmed, kTaken, kRemoved };
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler reads the slots");
Slot g_slots[16];

// A slot holding `path`, armed before the file is made (a signal in between removes nothing;
// none comes while the file exists unlisted); -1 when every slot is in use or the path does
// not fit.
int arm_slot(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < static_cast<int>(std::size(g_slots)); ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kArmed);
    return i;
  }
  return -1;
}

// After the temporary is renamed or removed. A slot a handler is reading stays taken: the
// process is ending.
void release_slot(int slot) {
  if (slot < 0) return;
  for (int done : {kArmed, kRemoved}) {
    int expected = done;
    if (g_slots[slot].state.compare_exchange_strong(expected, kFree)) return;
  }
}

}  // namespace

void remove_unfinished_temporaries() {
  for (Slot& slot : g_slots) {
    int expected = kArmed;
    if (!slot.state.compare_exchange_strong(expected, kTaken)) continue;
    ::unlink(slot.path);
    slot.state.store(kRemoved);
  }
}

WholeFile::WholeFile(std::string path) : path_(std::move(path)), target_(target_of(path_)) {
  const bool in_place = is_special(target_);
  tmp_ = in_place ? target_ : target_ + ".tmp." + std::to_string(::getpid());
  if (!in_place) slot_ = arm_slot(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CLOEXEC | (in_place ? 0 : O_CREAT | O_TRUNC), 0666);
  if (fd_ < 0) {
    const int saved = errno;
    release_slot(std::exchange(slot_, -1));
    throw Error(in_place ? "cannot open '" + path_ + "' to write: " + std::strerror(saved)
                         : "cannot create '" + tmp_ + "' to write " + path_ + ": " +
                               std::strerror(saved));
  }
}

WholeFile::~WholeFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (tmp_ != target_) ::unlink(tmp_.c_str());
  release_slot(std::exchange(slot_, -1));
}

void WholeFile::write(std::span<const unsigned char> bytes) {
  BRIGADE_CHECK(fd_ >= 0, path_ << ": written after it was committed or failed");
  if (!write_all(fd_, bytes.data(), bytes.size())) fail("write");
}

void WholeFile::write(std::string_view text) {
  write({reinterpret_cast<const unsigned char*>(text.data()), text.size()});
}

void WholeFile::commit() {
  BRIGADE_CHECK(fd_ >= 0, path_ << ": committed twice, or after it failed");
  // A device or a pipe has no blocks to flush (fsync says EINVAL) and nothing to rename.
  const bool in_place = tmp_ == target_;
  if (!in_place && ::fsync(fd_) != 0) fail("fsync");
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("close");
  if (in_place) return;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename");
  release_slot(std::exchange(slot_, -1));
  // Make the rename durable. Best effort: the new file is already complete and in place,
  // and some file systems refuse fsync on a directory.
  const int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

void WholeFile::fail(const std::string& what) {
  const int saved = errno;
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (tmp_ == target_) throw Error(path_ + ": " + what + " failed: " + std::strerror(saved));
  ::unlink(tmp_.c_str());
  release_slot(std::exchange(slot_, -1));
  throw Error(path_ + ": " + what + " failed while writing '" + tmp_ + "': " +
              std::strerror(saved) + " (the previous file, if any, is untouched)");
}

void write_whole_file(const std::string& path, std::string_view text) {
  WholeFile file(path);
  file.write(text);
  file.commit();
}

GrowingFile::GrowingFile(std::string path, bool keep) : path_(std::move(path)) {
  // O_APPEND: every record lands at the end, whatever was cut off before it.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (keep ? 0 : O_TRUNC),
               0666);
  if (fd_ < 0) throw Error("cannot open '" + path_ + "' to write: " + std::strerror(errno));
  struct stat s {};
  if (keep && ::fstat(fd_, &s) == 0) whole_bytes_ = s.st_size;
}

GrowingFile::GrowingFile(GrowingFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      whole_bytes_(other.whole_bytes_) {}

GrowingFile& GrowingFile::operator=(GrowingFile&& other) noexcept {
  std::swap(path_, other.path_);
  std::swap(fd_, other.fd_);
  std::swap(whole_bytes_, other.whole_bytes_);
  return *this;
}

GrowingFile::~GrowingFile() {
  if (fd_ >= 0) ::close(fd_);
}

void GrowingFile::append(std::string_view record) {
  BRIGADE_CHECK(fd_ >= 0, "'" << path_ << "': appended to after it was closed or failed");
  if (!write_all(fd_, reinterpret_cast<const unsigned char*>(record.data()), record.size()))
    fail("write");
  whole_bytes_ += static_cast<long long>(record.size());
}

void GrowingFile::close() {
  if (fd_ < 0) return;
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("fsync");  // EINVAL: a pipe, a device
  if (::close(std::exchange(fd_, -1)) != 0) fail("close");
}

void GrowingFile::fail(const std::string& what) {
  const int saved = errno;
  // Cutting back frees blocks, so it works on a full disk too. A device or a pipe cannot be
  // cut (nor removed): what reached it stays.
  const bool regular = !is_special(path_);
  if (regular && whole_bytes_ == 0) {
    ::unlink(path_.c_str());
  } else if (regular) {
    if (fd_ >= 0) (void)::ftruncate(fd_, whole_bytes_);
    else (void)::truncate(path_.c_str(), whole_bytes_);
  }
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  throw Error(path_ + ": " + what + " failed: " + std::strerror(saved) +
              (!regular           ? std::string()
               : whole_bytes_ > 0 ? " (the file ends with its last whole record)"
                                  : " (the file is removed: it held no whole record)"));
}

}  // namespace brigade

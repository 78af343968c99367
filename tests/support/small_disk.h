// SmallDisk: a tmpfs of a few KiB mounted for one test, so that a write meets a full disk for
// real (ENOSPC from the kernel, short writes at the last free block), not a simulation of one.
// Mounting needs root (CAP_SYS_ADMIN): where it is refused, mounted() is false and why() says
// why, and the test SKIPs with a MESSAGE. The destructor unmounts, whether the test passed,
// failed a check or threw.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace brigade::testing {

class SmallDisk {
 public:
  static constexpr uint64_t kBlock = 4096;  // tmpfs hands out pages

  SmallDisk(const std::string& name, uint64_t bytes)
      : path_(std::filesystem::temp_directory_path() /
              ("brigade-small-disk-" + std::to_string(::getpid()) + "-" + name)) {
    std::filesystem::create_directories(path_);
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = "cannot mount a tmpfs on " + path_.string() + " (" + std::strerror(errno) +
             "): run as root to test a full disk";
      std::filesystem::remove(path_);
    }
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  ~SmallDisk() {
    if (!mounted_) return;
    ::umount2(path_.c_str(), MNT_DETACH);  // lazily: a file still open in it does not block it
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }

  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::filesystem::path& path() const { return path_; }

  // Fills the disk with the file "filler" until `bytes` (rounded up to whole blocks) are left
  // free: written block by block until the kernel says the disk is full, then cut back.
  void leave_free(uint64_t bytes) {
    const std::string filler = (path_ / "filler").string();
    const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::vector<char> block(kBlock, 'x');
    off_t size = 0;
    for (ssize_t put; (put = ::write(fd, block.data(), block.size())) > 0;) size += put;
    const off_t give = static_cast<off_t>((bytes + kBlock - 1) / kBlock * kBlock);
    (void)::ftruncate(fd, size > give ? size - give : 0);
    ::close(fd);
  }

  uint64_t free_bytes() const {
    struct statvfs s {};
    if (::statvfs(path_.c_str(), &s) != 0) return 0;
    return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  }

 private:
  std::filesystem::path path_;
  bool mounted_ = false;
  std::string why_;
};

}  // namespace brigade::testing

// engine/output_file.h: every write, fsync, close and rename checked, the file and the reason
// named, and nothing half-written left under the final name. Failures are real ones from the
// kernel: /dev/full (ENOSPC on every write), a file-size limit (EFBIG part-way through a
// write), a tmpfs filled up (ENOSPC at the last free block), a directory that is missing.
#include "engine/output_file.h"

#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/error.h"
#include "tests/support/error_text.h"
#include "tests/support/small_disk.h"

namespace fs = std::filesystem;
using brigade::Error;
using brigade::GrowingFile;
using brigade::WholeFile;
using brigade::write_whole_file;
using brigade::testing::error_text;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() /
             ("brigade-output-file-" + std::to_string(::getpid()) + "-" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // What the directory holds, by name: a leftover temporary shows up here.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs fn with writes limited to `bytes` per file: past it write() fails with EFBIG ("File
// too large") after a short write, a real I/O error in the middle of a file. SIGXFSZ would
// kill the process instead: ignored meanwhile. Both are restored before returning.
template <class Fn>
std::string with_file_size_limit(rlim_t bytes, Fn fn) {
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit small = old;
  small.rlim_cur = bytes;
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string message = error_text<Error>(fn);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  return message;
}

const std::string kTmp = ".tmp." + std::to_string(::getpid());

}  // namespace

TEST_CASE("output file: a whole file is written, replaces the old one, and leaves no temporary") {
  TempDir dir("whole");
  const std::string path = dir.file("out.json");
  write_whole_file(path, "first\n");
  CHECK(slurp(path) == "first\n");
  write_whole_file(path, "second, longer\n");
  CHECK(slurp(path) == "second, longer\n");
  CHECK(dir.names() == std::vector<std::string>{"out.json"});
}

TEST_CASE("output file: a symbolic link keeps pointing at the file, which is replaced") {
  TempDir dir("link");
  const std::string real = dir.file("run7.safetensors"), link = dir.file("latest.safetensors");
  write_whole_file(real, "old");
  fs::create_symlink(real, link);
  write_whole_file(link, "new");
  CHECK(fs::is_symlink(link));
  CHECK(slurp(real) == "new");
  CHECK(dir.names() == std::vector<std::string>{"latest.safetensors", "run7.safetensors"});
}

TEST_CASE("output file: a write that fails part-way leaves the old file, or none, and no temporary") {
  TempDir dir("cut");
  const std::string path = dir.file("out.svg");
  const std::string big(256 << 10, 'x');  // 256 KiB, past the 64 KiB limit below
  SUBCASE("a new file: nothing under its name") {
    const std::string message = with_file_size_limit(64 << 10, [&] { write_whole_file(path, big); });
    CHECK(message == path + ": write failed while writing '" + path + kTmp +
                         "': File too large (the previous file, if any, is untouched)");
    CHECK(dir.names().empty());
  }
  SUBCASE("an old file: as it was") {
    write_whole_file(path, "old\n");
    const std::string message = with_file_size_limit(64 << 10, [&] { write_whole_file(path, big); });
    CHECK(message.find("File too large") != std::string::npos);
    CHECK(slurp(path) == "old\n");
    CHECK(dir.names() == std::vector<std::string>{"out.svg"});
  }
}

TEST_CASE("output file: /dev/full is written in place, and says the disk is full") {
  if (!fs::exists("/dev/full")) {
    MESSAGE("SKIP: this system has no /dev/full");
    return;
  }
  // A device: nothing to rename over, so no temporary is made next to it in /dev.
  CHECK(error_text<Error>([] { write_whole_file("/dev/full", "x"); }) ==
        "/dev/full: write failed: No space left on device");
  GrowingFile full("/dev/full", false);
  CHECK(error_text<Error>([&] { full.append("{}\n"); }) ==
        "/dev/full: write failed: No space left on device");
  CHECK(!full.is_open());
  CHECK(fs::exists("/dev/full"));  // a device is never removed
  CHECK(!fs::exists("/dev/full" + kTmp));
}

TEST_CASE("output file: a temporary that cannot be made is named, and nothing is written") {
  TempDir dir("missing");
  const std::string path = dir.file("no/such/dir/out.json");
  CHECK(error_text<Error>([&] { write_whole_file(path, "x"); }) ==
        "cannot create '" + path + kTmp + "' to write " + path + ": No such file or directory");
  CHECK(dir.names().empty());
}

TEST_CASE("output file: a whole file abandoned between writes removes its temporary") {
  TempDir dir("abandoned");
  const std::string path = dir.file("ckpt.safetensors");
  {
    WholeFile file(path);
    file.write("header");
    CHECK(dir.names() == std::vector<std::string>{"ckpt.safetensors" + kTmp});
  }  // as when the next tensor's bytes throw before they are written
  CHECK(dir.names().empty());
}

// What a signal handler calls before its signal ends the process (tools/train/signals.h):
// every temporary still being written is removed, and nothing else.
TEST_CASE("output file: remove_unfinished_temporaries removes the temporaries, only them") {
  TempDir dir("unfinished");
  write_whole_file(dir.file("done.json"), "{}");
  WholeFile first(dir.file("ckpt.safetensors"));
  first.write("header");
  WholeFile second(dir.file("trace.svg"));
  CHECK(dir.names() ==
        std::vector<std::string>{"ckpt.safetensors" + kTmp, "done.json", "trace.svg" + kTmp});
  brigade::remove_unfinished_temporaries();
  CHECK(dir.names() == std::vector<std::string>{"done.json"});
  // A file made after it is a new one, and is removed by the next call in turn.
  WholeFile third(dir.file("plot.svg"));
  third.write("<svg/>");
  third.commit();
  WholeFile fourth(dir.file("m.json"));
  brigade::remove_unfinished_temporaries();
  CHECK(dir.names() == std::vector<std::string>{"done.json", "plot.svg"});
}

TEST_CASE("output file: a growing file keeps only whole records when a write fails") {
  TempDir dir("growing");
  const std::string path = dir.file("m.jsonl");
  SUBCASE("a record cut by the limit is cut off again") {
    GrowingFile file(path, false);
    const std::string line(1000, 'a');
    const std::string message = with_file_size_limit(2500, [&] {
      for (int i = 0; i < 10; ++i) file.append(line + "\n");
    });
    CHECK(message == path + ": write failed: File too large (the file ends with its last whole record)");
    CHECK(slurp(path) == line + "\n" + line + "\n");  // 2 of 1,001 bytes; the third cut at 2,500
    CHECK(!file.is_open());
  }
  SUBCASE("a file that never got a whole record is removed") {
    GrowingFile file(path, false);
    const std::string message =
        with_file_size_limit(100, [&] { file.append(std::string(1000, 'a') + "\n"); });
    CHECK(message == path + ": write failed: File too large (the file is removed: it held no whole record)");
    CHECK(dir.names().empty());
  }
  SUBCASE("kept: a resumed run appends after what was there, and a failure keeps that") {
    { std::ofstream(path) << "old\n"; }
    GrowingFile file(path, true);
    file.append("new\n");
    CHECK(slurp(path) == "old\nnew\n");
    const std::string message = with_file_size_limit(10, [&] { file.append("too long\n"); });
    CHECK(message.find("File too large") != std::string::npos);
    CHECK(slurp(path) == "old\nnew\n");
  }
  SUBCASE("not kept: emptied when opened, closed with a check") {
    { std::ofstream(path) << "a previous run\n"; }
    GrowingFile file(path, false);
    file.append("1\n");
    file.close();
    CHECK(slurp(path) == "1\n");
    CHECK(error_text<Error>([&] { file.append("2\n"); }).find("after it was closed") !=
          std::string::npos);
  }
}

TEST_CASE("output file: on a full tmpfs, ENOSPC is named and nothing half-written remains") {
  brigade::testing::SmallDisk disk("output-file", 64 << 10);
  if (!disk.mounted()) {
    MESSAGE("SKIP: " << disk.why());
    return;
  }
  disk.leave_free(8 << 10);  // two blocks
  const std::string whole = (disk.path() / "trace.json").string();
  const std::string message = error_text<Error>([&] { write_whole_file(whole, std::string(20 << 10, 'x')); });
  CHECK(message == whole + ": write failed while writing '" + whole + kTmp +
                       "': No space left on device (the previous file, if any, is untouched)");
  CHECK(!fs::exists(whole));
  CHECK(!fs::exists(whole + kTmp));
  CHECK(disk.free_bytes() == 8 << 10);  // the temporary's blocks given back

  const std::string growing = (disk.path() / "m.jsonl").string();
  GrowingFile file(growing, false);
  const std::string line(999, 'a');
  int written = 0;
  const std::string full = error_text<Error>([&] {
    for (; written < 100; ++written) file.append(line + "\n");
  });
  CHECK(full == growing + ": write failed: No space left on device (the file ends with its last whole record)");
  CHECK(written == 8);  // 8 KiB hold 8 lines of 1,000 bytes; the ninth is cut and cut off
  CHECK(slurp(growing) == [&] {
    std::string eight;
    for (int i = 0; i < 8; ++i) eight += line + "\n";
    return eight;
  }());
}

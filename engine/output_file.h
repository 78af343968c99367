// Output files: every file Brigade writes (parameters, checkpoints, traces, pictures, plots,
// metrics, benchmark results) goes through one of these two, so that a full disk or an I/O
// error stops the writer with brigade::Error naming the file and the system's reason
// (strerror: "No space left on device"), and never leaves a half-written file that looks whole.
//
//   WholeFile    a file written at once (write_whole_file for a string). The bytes go to
//                `path.tmp.<pid>` in the same directory (a rename never crosses file systems),
//                every write checked, then fsync and close, checked, and only then renamed
//                over `path`: a reader sees the old file or the new one, never a part. On
//                failure the temporary is removed and `path` is as it was (absent, or the old
//                file). A path that names a device or a pipe (/dev/null, /dev/stdout) is
//                written in place: there is nothing to rename over. A symbolic link is
//                followed: the file it names is replaced, and the link stays.
//   GrowingFile  a file that grows one record at a time while a run goes on (--metrics' JSON
//                lines, read as they come by `tail -f` or pandas). Each append is written whole
//                or not at all: a failed one is cut off again, so the file ends with the last
//                whole record, and a file that never got one is removed.
//
// The messages follow one pattern: "PATH: write failed while writing 'TMP': REASON (...)".
// Failures clean up before throwing, not in a destructor: brigade-train ends a failed run
// with _Exit (tools/train/main.cpp), which runs none. A signal that ends the program while a
// WholeFile is written runs no destructor either: its handler calls
// remove_unfinished_temporaries() first (tools/train/signals.h).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace brigade {

class WholeFile {
 public:
  explicit WholeFile(std::string path);  // creates the temporary; throws naming both
  WholeFile(const WholeFile&) = delete;
  WholeFile& operator=(const WholeFile&) = delete;
  ~WholeFile();  // never committed (an exception between writes): the temporary removed

  void write(std::span<const unsigned char> bytes);
  void write(std::string_view text);
  // fsync, close and rename over the final path, then fsync the directory so the rename
  // survives a crash. After it the object holds nothing.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what);  // cleans up, throws with errno's reason

  std::string path_;    // as given: what messages name
  std::string target_;  // the file replaced: path_, or the file a symbolic link path_ names
  std::string tmp_;     // beside target_; target_ itself when written in place (a device, a pipe)
  int fd_ = -1;
  int slot_ = -1;       // tmp_'s entry in the table remove_unfinished_temporaries() reads
};

// Removes the temporary of every WholeFile not yet committed or given up (the WholeFiles stay
// unusable: a later write or commit fails). Async-signal-safe — no lock, no allocation, only
// unlink(2) — for a signal handler about to end the process: a program killed mid-write then
// leaves the old file, or none, and no `path.tmp.<pid>` beside it. Up to 16 temporaries at
// once are known to it (a 17th, or a path longer than PATH_MAX, is written without a slot).
void remove_unfinished_temporaries();

// The whole of `text` as the file `path` (WholeFile).
void write_whole_file(const std::string& path, std::string_view text);

class GrowingFile {
 public:
  GrowingFile() = default;  // no file: appends are errors
  // Opens `path`, created if absent; `keep` keeps what it holds (and appends after it),
  // otherwise it is emptied. Throws naming the path.
  GrowingFile(std::string path, bool keep);
  GrowingFile(GrowingFile&& other) noexcept;
  GrowingFile& operator=(GrowingFile&& other) noexcept;
  ~GrowingFile();

  bool is_open() const { return fd_ >= 0; }
  // One record (e.g. a line with its '\n'), written with write(2), so a reader sees it at
  // once (no buffer of ours holds it). On failure the file is cut back to its last whole
  // record (removed if it has none), closed, and Error says what failed.
  void append(std::string_view record);
  // fsync and close, checked (a network file system may report a failed write only here).
  // The destructor closes too, unchecked: for a run that ends by an error anyway.
  void close();

 private:
  [[noreturn]] void fail(const std::string& what);  // cuts back, closes, throws
  std::string path_;
  int fd_ = -1;
  long long whole_bytes_ = 0;  // the file's size after its last whole record
};

}  // namespace brigade

// The happens-before check of the emulated GPUs: two operations that touch one allocation, at
// least one of them writing, must be ordered by something CUDA guarantees — the order of one
// stream, an event recorded on one stream and waited for by another (cudaStreamWaitEvent),
// the legacy stream's implicit synchronisation with blocking streams, or the host having
// synchronised with the first before it issued the second. A pair that nothing orders is a
// data race: on a GPU its result depends on timing, so the emulated GPU faults, every time,
// with a text naming both operations, their streams and the allocation.
//
// The bookkeeping is vector clocks (one per stream, one for the host), updated when work is
// issued, not when it runs: the order CUDA promises is fixed by the calls, whatever the
// timing. Each range of an allocation's bytes keeps FastTrack's small history: its last write,
// and the reads since, one per stream (a stream's later read is ordered after its earlier
// ones). By range, not by allocation: two operations that touch different bytes of one
// allocation need no order, as on a GPU (the tensors of one memory pool, two halves of one
// buffer). An access knows its bytes: a copy's and a memset's count, a library call's operand,
// a kernel argument's declared extent (BRIGADE_EXTENT); a kernel argument without one may
// touch any byte of its allocation, and is taken to touch them all.
//
// All of it is internal to kernels/emu/cudart/ and kernels/emu/vendor/, and every function
// here runs with Emulation::mutex held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace brigade::emu::gpu {

struct StreamState;
struct Gpu;

// at(i): the last position of stream i (StreamState::id) ordered before the point this clock
// stands for; 0 when none is.
class VectorClock {
 public:
  uint64_t at(uint32_t stream) const { return stream < at_.size() ? at_[stream] : 0; }
  void advance(uint32_t stream, uint64_t position);
  // Takes the later of each entry; says whether anything changed.
  bool join(const VectorClock& other);
  // Sets one entry, earlier or later: a graph replay's clock, reused for each operation of
  // its branches (graphs.cpp).
  void set(uint32_t stream, uint64_t position);

 private:
  std::vector<uint64_t> at_;
};

// One operation's access of an allocation, as its history keeps it.
struct Access {
  uint32_t stream = 0;
  uint64_t position = 0;  // 0: no access
  std::string what;       // "kernel relu_forward_kernel", "cudaMemcpyAsync (source)"
  std::shared_ptr<const std::string> stream_name;  // "emulated cuda:1 stream #4"
  // The cudaGraphLaunch it was replayed by (a number of its own per launch), 0 when none: two
  // accesses of one launch that race are on branches the capture left unordered.
  uint64_t graph_launch = 0;
};

// The accesses of one range of bytes.
struct RangeHistory {
  Access last_write;
  std::vector<Access> reads;  // since last_write, at most one per stream
};

// An allocation's history: the ranges of its bytes that were accessed, each with the accesses
// all its bytes share. A write makes its range one; reads only split.
struct AccessHistory {
  struct Range {
    uint64_t end = 0;  // one past its last byte, from the allocation's start
    RangeHistory history;
  };
  std::map<uint64_t, Range> ranges;  // by first byte; disjoint; bytes in none: never accessed
};

// An access's extent when it is not known: every byte of the allocation.
inline constexpr uint64_t kWholeAllocation = ~uint64_t{0};

// Whether `before` is ordered before the point `now` stands for (a stream's clock, the host's).
bool ordered_before(const Access& before, const VectorClock& now);
// The first access of `history` (a write, or a read since it) not ordered before `now`, or
// null: with the host's clock, whether the host has seen all the device work on the memory done.
const Access* first_unordered(const AccessHistory& history, const VectorClock& now);

// The host's clock: what every synchronising call has seen complete (cudaStreamSynchronize,
// cudaEventSynchronize, a query that answered "done", cudaDeviceSynchronize, a blocking
// copy; not cudaFree, which need not synchronise); each time it grows, the copies into pinned host memory it now includes land
// (pinned.cpp). All host threads share it: the emulator cannot see how host threads order
// each other (mutexes, queues), so work one thread issues after another thread's sync is taken
// as ordered after it. A race between two host threads' issues can be missed; none is invented.
// A GPU that faults counts as synchronised (set_fault): it runs nothing more, and a race with
// work that never runs would only bury the first report.
void host_observes(const VectorClock& completed);
// Brings the host's clock into `stream` before it is given work (cheap when unchanged).
void inherit_host(StreamState& stream);

// Records that the operation `what`, enqueued on `stream` (its clock already advanced to it),
// reads or writes `bytes` bytes from `pointer` (kWholeAllocation: any byte of its allocation;
// 0: none); pointers into no allocation (pageable host memory, null) are not tracked, and
// bytes past the allocation's end are the bounds checks' to report, not this one's. A race
// with an earlier unordered access of any of the bytes faults the stream's GPU
// (cudaErrorLaunchFailure, sticky): the operation and all later work on it do not run.
// `position`: the stream's position the access is ordered as, when not its last one (0).
void record_access(StreamState& stream, const void* pointer, uint64_t bytes, bool write,
                   const std::string& what, uint64_t position = 0);
// The same check for an access whose order is not a stream's: `access` is ordered after what
// `now` holds (a branch of a replayed graph: graphs.cpp); a race faults `gpu`.
void check_access(Gpu& gpu, const VectorClock& now, Access access, const void* pointer,
                  uint64_t bytes, bool write);

}  // namespace brigade::emu::gpu

// The state behind the emulated CUDA runtime: GPUs, their streams and events, device memory,
// and each host thread's current device and last error. Internal to kernels/emu/cudart/.
//
// One mutex (Emulation::mutex) guards all of it, and one condition variable (changed) is
// notified whenever a stream completes an item, so a host call or a stream waiting for
// another stream waits on one predicate over plain counters. The emulator is for
// correctness, not speed: one lock is the design that is easy to prove.
//
// A stream is a worker thread draining a FIFO of tasks, each with a position 1, 2, 3, ...;
// "position p has run" is `completed >= p`. An event record is a (stream, position) pair.
// This is engine/stream_cpu.cpp's model, rebuilt here beneath the CUDA API so that the code
// under test (engine/stream_cuda.cpp) is the code a real GPU runs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/emu/cudart/hb.h"
#include "kernels/emu/cudart/include/cuda_emulation.h"
#include "kernels/emu/cudart/include/cuda_runtime_api.h"
#include "kernels/emu/multiprocessors.h"

namespace brigade::emu::gpu {

struct StreamState;
struct Capture;  // a stream capture in progress (capture.cpp)
struct PinnedDownload;  // a copy into pinned host memory, not yet landed (pinned.cpp)
struct PinnedUpload;    // a copy from pinned host memory, not yet run (pinned.cpp)

// A stream's worker: runs tasks in order; a task that throws faults the stream's GPU.
struct Task {
  std::function<void()> run;
  std::string what;  // "kernel relu_forward_kernel", "a copy": names it when it fails
};

// One emulated GPU.
struct Gpu {
  int index = 0;
  uint64_t capacity = 0;       // bytes: cudaMalloc beyond it is cudaErrorMemoryAllocation
  uint64_t in_use = 0;         // bytes of live cudaMalloc blocks
  std::vector<char> peer_enabled;  // peer_enabled[p]: this GPU's kernels may touch p's memory
  // A fault (a kernel that failed): sticky, as on a GPU. Every later call that touches this
  // GPU returns it; its streams skip their remaining work.
  cudaError_t fault = cudaSuccess;
  std::string fault_detail;
  std::shared_ptr<StreamState> legacy;            // the NULL stream, made at first use
  std::vector<std::weak_ptr<StreamState>> streams;  // every live stream, legacy included
  // Pageable cudaMemcpy host-to-device copies that have returned but not landed: they land
  // when something is next ordered after the legacy stream (see copies.cpp).
  std::vector<Task> unlanded;
  // A cudaMemcpyPeer in flight: all later work on this GPU is ordered after it.
  std::shared_ptr<StreamState> barrier_stream;
  uint64_t barrier_position = 0;
  VectorClock barrier_clock;  // barrier_stream's clock at barrier_position (hb.h)
  // The threads that run the GPU's blocks, shared by the grids of all its streams at once.
  std::unique_ptr<Multiprocessors> sm;
  uint64_t streams_made = 0;       // numbers this GPU's streams for chaos.cpp
};

struct StreamState {
  Gpu* gpu = nullptr;
  bool legacy = false;     // the NULL stream of its GPU
  bool blocking = false;   // created without cudaStreamNonBlocking: ordered with the legacy one
  bool destroyed = false;  // the handle is gone; the worker drains and ends
  uint64_t enqueued = 0;   // positions handed out
  uint64_t completed = 0;  // positions done
  std::deque<std::pair<uint64_t, Task>> queue;
  // The happens-before check (hb.h): the stream's number in every vector clock, its clock
  // (what is ordered before the work it was last given), the host clock version it has taken
  // in, and its name in a race's text.
  uint32_t id = 0;
  VectorClock clock;
  uint64_t host_version_seen = 0;
  std::shared_ptr<const std::string> name;
  std::condition_variable wake;  // the worker waits here for tasks
  std::thread worker;
  uint64_t chaos_state = 0;  // the worker's own generator of delays (chaos.cpp)
  // The capture this stream's work goes into instead of its queue (cudaStreamBeginCapture,
  // or a wait on an event recorded in a capture); null when it runs what it is given.
  std::shared_ptr<Capture> capture;
};

// One cudaEventRecord: immutable; re-recording an event makes a new one.
struct Record {
  std::shared_ptr<StreamState> stream;
  uint64_t position = 0;
  // The stream's clock at the record: what a wait on it is ordered after. Recorded in a
  // capture, the capture's own clock (its entries are branches of the graph; capture.cpp).
  VectorClock clock;
  std::chrono::steady_clock::time_point at{};  // set by the worker when it passes the marker
  // Recorded on a capturing stream: the capture, and how many operations that stream had
  // captured then (a wait on it by the capture's origin joins that stream back; capture.cpp).
  std::shared_ptr<Capture> capture;
  uint64_t captured_ops = 0;
};

}  // namespace brigade::emu::gpu

// The handles of the API are pointers to these.
struct CUstream_st {
  std::shared_ptr<brigade::emu::gpu::StreamState> state;
};
struct CUgraph_st;      // captured_graph.h
struct CUgraphExec_st;  // captured_graph.h
struct CUevent_st {
  brigade::emu::gpu::Gpu* gpu = nullptr;
  unsigned flags = 0;
  std::shared_ptr<brigade::emu::gpu::Record> last;  // null until the first record
};

namespace brigade::emu::gpu {

// A block of memory the runtime handed out.
struct Allocation {
  uint64_t bytes = 0;
  Gpu* gpu = nullptr;  // null: pinned host memory (cudaMallocHost)
  AccessHistory history;  // the happens-before check's (hb.h); a new allocation starts empty
  // What the engine's allocator has lent of it (cuda_emulation.h's lend): the bytes the
  // tensor in it asked for, 0 while it waits in the allocator's cache. Unset for memory the
  // allocator never lent (a test's own cudaMalloc): then the whole allocation may be used.
  std::optional<uint64_t> lent;
  // How many times the engine's allocator has lent it or taken it back (each lend call): a
  // graph captured while one tensor held the block may not touch it once another does, or
  // while it waits in the cache (graphs.cpp), whatever their sizes.
  uint64_t lendings = 0;
  uint64_t usable() const { return lent.value_or(bytes); }
};

// How reports name an allocation (hb.cpp): "emulated cuda:1 memory 0x55951161ec00 (an
// allocation of 256 bytes)", for the allocation starting at `start`; with what the engine's
// allocator lent of it when it did: "(an allocation of 1024 bytes, 1000 of them lent to a
// tensor)" or "(... bytes, back in the allocator's cache)".
std::string memory_name(const Allocation& a, uintptr_t start);

// A pointer as reports print it: "0x55951161ec00" (memory.cpp).
std::string hex(const void* p);

class Emulation {
 public:
  static Emulation& get();  // made at first use, never destroyed (workers may outlive main)

  std::mutex mutex;
  std::condition_variable changed;  // a stream completed something

  // Set once, from BRIGADE_EMULATED_GPUS and BRIGADE_EMULATED_GPU_MEMORY; a bad value leaves
  // no GPUs and `setup_error` saying why (cudaGetDeviceCount returns it).
  std::vector<std::unique_ptr<Gpu>> gpus;
  std::string setup_error;
  bool peer_supported = true;  // BRIGADE_EMULATED_GPU_PEER
  // BRIGADE_EMULATED_GPU_CC: every GPU's compute capability (cudaDeviceGetAttribute), 9.0 as an
  // H100's or H200's unless told otherwise.
  int compute_major = 9, compute_minor = 0;
  // BRIGADE_EMU_CHAOS (or set_chaos_seed); -1: no delays (chaos.cpp). Read without the lock.
  std::atomic<int64_t> chaos_seed{-1};

  std::map<uintptr_t, Allocation> allocations;  // by start address
  ApiCounts counts;  // cuda_emulation.h
  std::set<const CUstream_st*> live_streams;
  std::set<const CUevent_st*> live_events;
  std::set<const CUgraph_st*> live_graphs;           // cudaStreamEndCapture's, until destroyed
  std::set<const CUgraphExec_st*> live_graph_execs;  // cudaGraphInstantiate's, until destroyed
  std::set<std::shared_ptr<Capture>> captures;       // the captures in progress
  // The happens-before check (hb.h): the host's clock, a version that changes with it, and
  // the next stream's number.
  VectorClock host_clock;
  uint64_t host_version = 0;
  uint32_t next_stream_id = 0;
  uint64_t graph_launches = 0;  // numbers each cudaGraphLaunch for the check (Access)
  // Copies between device memory and pinned host memory in flight (pinned.cpp), each list in
  // the order they were issued: the downloads the host has not yet seen done, and the uploads
  // their streams have not yet run; `pinned_copies` numbers them.
  std::vector<std::shared_ptr<PinnedDownload>> unlanded_downloads;
  std::vector<std::shared_ptr<PinnedUpload>> pending_uploads;
  uint64_t pinned_copies = 0;

  // The allocation holding [p, p + bytes), or null (pageable host memory or out of bounds).
  const Allocation* find(const void* p, uint64_t bytes, uintptr_t* start = nullptr) const;
  Allocation* find(const void* p, uint64_t bytes, uintptr_t* start = nullptr) {
    return const_cast<Allocation*>(std::as_const(*this).find(p, bytes, start));
  }

 private:
  Emulation();
};

// ---- errors (errors.cpp) --------------------------------------------------------------------
// Every API function returns through these: the code becomes the calling thread's last error
// (CUDA keeps it until cudaGetLastError), and `detail`, the emulator's explanation, is what
// cudaGetErrorString gives for it on this thread.
cudaError_t fail(cudaError_t code, std::string detail);
inline cudaError_t ok() { return cudaSuccess; }
// The calling thread's last error, as cudaPeekAtLastError gives it: for the emulation's own
// returns, which are no calls of the API (call_counts.h counts those).
cudaError_t last_error();
// The calling thread's current device (cudaSetDevice; 0 until set).
int& current_device();

// ---- devices (devices.cpp); all with Emulation::mutex held -----------------------------------
// The GPU numbered `index`, or null (after fail(cudaErrorInvalidDevice, ...)).
Gpu* gpu_at(int index, const char* call);
// The calling thread's current GPU, or null after fail(...) (no GPU, or a sticky fault).
Gpu* current_gpu(const char* call);
// The sticky fault of `gpu` as this call's result, or cudaSuccess.
cudaError_t fault_of(const Gpu& gpu);
// Marks the GPU faulted (the first fault wins) and says so once on stderr.
void set_fault(Gpu& gpu, cudaError_t code, const std::string& detail);
std::string name_of(const Gpu& gpu);  // "emulated cuda:1"
inline std::string name_of(const StreamState& s) { return *s.name; }

// ---- streams (streams.cpp); all with Emulation::mutex held ----------------------------------
// The stream a handle names (0 and cudaStreamLegacy: the current GPU's legacy stream), or null
// after fail(...).
std::shared_ptr<StreamState> stream_of(cudaStream_t handle, const char* call);
std::shared_ptr<StreamState> legacy_stream(Gpu& gpu);
// Appends a task; returns its position. Orders it as CUDA orders the stream's kind: work on
// the legacy stream waits for the GPU's blocking streams and lands pending pageable copies,
// work on a blocking stream waits for the legacy stream.
uint64_t enqueue(StreamState& stream, Task task);
// Appends a task that makes `waiter` wait until `target` has run `position`; `clock` is
// target's clock at `position`, which the waiter's takes in (done or not, it is ordered).
void enqueue_wait(StreamState& waiter, std::shared_ptr<StreamState> target, uint64_t position,
                  const VectorClock& clock);
// Blocks (releasing the lock) until `stream` has run `position`, or its GPU has faulted.
void wait_for(std::unique_lock<std::mutex>& lock, const StreamState& stream, uint64_t position);
// Blocks until every stream of the GPU has run all it holds; the host's clock takes in theirs
// when `observed` (cudaDeviceSynchronize), not for a call that only happens to wait
// (cudaFree, cudaFreeHost: CUDA does not promise that they synchronise, so nothing may rely
// on them for order: the happens-before check does not count them).
void drain(std::unique_lock<std::mutex>& lock, Gpu& gpu, bool observed);

// ---- pinned host memory (pinned.cpp); all with Emulation::mutex held ------------------------
// A copy between device memory and pinned host memory (cudaMallocHost), `into_pinned` saying
// which way, enqueued on `stream` (not capturing) as a GPU's DMA would do it; returns its
// position. Into pinned memory, the destination is poison from the call until the host sees
// the copy done (host_observes lands it); from pinned memory, the source is read when the
// stream runs the copy, and a source the host changed since the call faults the GPU.
uint64_t enqueue_pinned_copy(StreamState& stream, void* dst, const void* src, uint64_t bytes,
                             bool into_pinned, const std::string& call);
// Lands the downloads the host's clock now includes (hb.cpp's host_observes calls it).
void land_pinned_downloads();
// Adds to `drained` the downloads on `gpu` whose streams were destroyed and have ended, so
// all they held has run: an observed drain (cudaDeviceSynchronize) waits for a destroyed
// stream's work as a GPU does, and sees these done though no live stream holds them.
void finished_downloads(const Gpu& gpu, VectorClock& drained);
// Drops the copies from or into [memory, memory + bytes) still pending: cudaFreeHost frees it
// once all GPUs are drained, and only a faulted GPU's uploads, which never run, and downloads
// the host never saw done are left.
void forget_pinned_copies(const void* memory, uint64_t bytes);

// ---- stream capture (capture.cpp); all with Emulation::mutex held --------------------------
// What a capturing stream is given goes into its capture, not its queue: enqueue hands the
// task here (its position is 0: it has none), record_access the accesses that follow it.
void capture_task(StreamState& stream, Task task);
void capture_access(StreamState& stream, const void* pointer, uint64_t bytes, bool write,
                    const std::string& what);
// The check the last task given to `stream` makes at its launch, to make again at every replay
// of the graph (CapturedOperation::recheck; a kernel's declared extents).
void capture_recheck(StreamState& stream, std::function<std::string()> recheck);
// The calls CUDA forbids during a capture, each failing, and invalidating the capture, as on a
// GPU; each returns cudaSuccess when the call may go on.
//   capturing_stream_refused: a call that waits for or queries a capturing stream
//     (cudaStreamSynchronize, cudaStreamQuery): cudaErrorStreamCaptureUnsupported;
//   unsafe_call_refused: a call that may synchronise implicitly (cudaMalloc, cudaFree,
//     cudaMallocHost, cudaFreeHost, cudaDeviceSynchronize, a synchronous cudaMemcpy) or that
//     waits for or queries work outside the capture (cudaStreamSynchronize, cudaStreamQuery,
//     cudaEventSynchronize, cudaEventQuery, of any stream or event) while a capture of
//     cudaStreamCaptureModeGlobal (any thread) or ThreadLocal (this thread) is in progress:
//     cudaErrorStreamCaptureUnsupported;
//   legacy_stream_refused: any use of the legacy stream of a GPU one of whose blocking
//     streams is capturing (it would depend on the capture): cudaErrorStreamCaptureImplicit.
//   device_wide_wait_refused: a wait for the whole of a GPU (cudaDeviceSynchronize; cudaFree
//     of its memory; cudaFreeHost, which waits for every GPU: `gpu` null) while any stream of
//     it captures, on any thread and in any mode (the Programming Guide: it is invalid "to
//     synchronize a broader handle which encompasses an active stream capture, such as a device
//     or context handle"; a thread-local capture is invalidated by another thread's
//     cudaDeviceSynchronize on the same GPU, as measured on NVIDIA GPUs). Whether cudaFree's
//     wait counts CUDA does not say: the emulation refuses it, the stricter answer, and
//     Brigade's allocator never frees a GPU's memory while the GPU captures (allocator.h).
// Why the capture `stream` is in was invalidated; "" when it holds or there is none.
std::string invalidated_capture(const StreamState& stream);
// Invalidates `capture` (the first reason stays) and fails the call with `code`.
cudaError_t invalidate_capture(Capture& capture, cudaError_t code, const std::string& why);
cudaError_t capturing_stream_refused(StreamState& stream, const char* call);
cudaError_t unsafe_call_refused(const char* call);
cudaError_t legacy_stream_refused(Gpu& gpu, const char* call);
cudaError_t device_wide_wait_refused(const Gpu* gpu, const char* call);
// cudaStreamWaitEvent's and cudaEventRecord's part in a capture (forks and joins); a refusal
// as above, or cudaSuccess with `handled` set when the capture took the call over.
cudaError_t capture_wait(StreamState& waiter, const Record& record, bool* handled);
cudaError_t captured_event_refused(const Record& record, const char* call);
std::shared_ptr<Record> capture_record(const std::shared_ptr<StreamState>& stream);

// ---- chaos (chaos.cpp): BRIGADE_EMU_CHAOS=SEED, seeded random delays ------------------------
// The first state of the generator of `gpu`'s stream numbered `number` (0 without chaos).
uint64_t chaos_state_for_stream(const Gpu& gpu, uint64_t number);
// In a stream's worker, before each task, without the lock: maybe a pause.
void chaos_before_task(StreamState& stream);
// Declared first in a host API call, before its lock: when the call returns, after the lock is
// released, the calling thread maybe pauses.
class ChaosAfterCall {
 public:
  ChaosAfterCall() = default;
  ~ChaosAfterCall();
  ChaosAfterCall(const ChaosAfterCall&) = delete;
  ChaosAfterCall& operator=(const ChaosAfterCall&) = delete;
};

}  // namespace brigade::emu::gpu

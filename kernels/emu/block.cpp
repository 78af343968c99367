// BlockRunner: a block's CUDA threads as fibers, with __syncthreads() and warp shuffles.
#include "kernels/emu/block.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine/error.h"

namespace brigade::emu {

namespace detail {
thread_local Builtins builtins;
}  // namespace detail

namespace {
thread_local BlockRunner* running_runner = nullptr;  // set while a block runs on this thread

std::string str(uint3 v) {
  std::ostringstream os;  // (GCC 12 warns falsely about chains of std::string operator+)
  os << "(" << v.x << "," << v.y << "," << v.z << ")";
  return os.str();
}

// Two call sites are the same one: the same line of the same file. The file names are
// __builtin_FILE's (emu.h's CallSite), one literal per file in practice, so comparing the pointers
// settles it nearly always; strcmp is for a linker that kept two copies.
bool same_site(const char* file_a, unsigned line_a, const char* file_b, unsigned line_b) {
  return line_a == line_b && (file_a == file_b || std::strcmp(file_a, file_b) == 0);
}

// Clears running_runner however run() leaves (normally or by an exception).
struct RunningScope {
  explicit RunningScope(BlockRunner* runner) { running_runner = runner; }
  ~RunningScope() { running_runner = nullptr; }
};
}  // namespace

BlockRunner& BlockRunner::for_this_thread() {
  static thread_local BlockRunner runner;
  return runner;
}

BlockRunner& BlockRunner::running(const char* what) {
  BRIGADE_CHECK(running_runner != nullptr,
                "CUDA emulator: " << what << " called outside an emulated kernel");
  return *running_runner;
}

void BlockRunner::thread_main(void* runner) {
  auto* self = static_cast<BlockRunner*>(runner);
  (*self->body_)();  // the kernel, for the thread whose indices the scheduler has set
}

std::string BlockRunner::where() const {
  std::ostringstream os;
  os << "kernel " << config_->kernel << ", block " << str(block_idx_) << ", thread "
     << str(threads_[current_]->idx);
  return os.str();
}

void BlockRunner::run(const LaunchConfig& config, uint3 block_idx, const ThreadBody& body) {
  BRIGADE_CHECK(running_runner == nullptr,
                "CUDA emulator: kernel " << config.kernel << " run from inside kernel "
                                         << running_runner->config_->kernel
                                         << " (launches from device code are not emulated)");
  const dim3 b = config.block;
  size_ = static_cast<int>(b.x * b.y * b.z);
  config_ = &config;
  body_ = &body;
  block_idx_ = block_idx;
  while (static_cast<int>(threads_.size()) < size_) {
    threads_.push_back(std::make_unique<Thread>());
    stacks_.push_back(std::make_unique<FiberStack>());
  }
  // Linear thread index t = x + y*blockDim.x + z*blockDim.x*blockDim.y; warp = t / 32.
  for (int t = 0; t < size_; ++t) {
    Thread& th = *threads_[t];
    const unsigned u = static_cast<unsigned>(t);
    th.idx = {u % b.x, u / b.x % b.y, u / (b.x * b.y)};
    th.state = State::runnable;
    th.fiber.start(*stacks_[t], &BlockRunner::thread_main, this);
  }
  block_arrived_ = 0;
  warp_arrived_.assign(static_cast<size_t>((size_ + warpSize - 1) / warpSize), 0);
  // Shared memory is uninitialised in CUDA: all-ones bytes make a read-before-write show
  // up as NaN (floats) or -1 (integers) rather than as a plausible zero. Exactly the
  // launch's size (so ASan sees an overrun), kept from the last block when it has that size.
  if (dynamic_shared_ == nullptr || dynamic_shared_bytes_ != config.dynamic_shared_bytes) {
    dynamic_shared_ = std::make_unique<std::byte[]>(config.dynamic_shared_bytes);
    dynamic_shared_bytes_ = config.dynamic_shared_bytes;
  }
  std::memset(dynamic_shared_.get(), 0xFF, config.dynamic_shared_bytes);
  detail::builtins.grid_dim = config.grid;
  detail::builtins.block_dim = config.block;
  detail::builtins.block_idx = block_idx;

  RunningScope scope(this);
  int exited = 0;
  while (exited < size_) {
    bool ran = false;
    for (int t = 0; t < size_; ++t) {
      Thread& th = *threads_[t];
      if (th.state != State::runnable) continue;
      current_ = t;
      detail::builtins.thread_idx = th.idx;
      th.fiber.resume();
      ran = true;
      if (!th.fiber.finished()) continue;  // it stopped at a barrier
      th.state = State::exited;
      ++exited;
      if (std::exception_ptr error = th.fiber.error()) {
        // Abandon the block (the other fibers are restarted by the next run()).
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          throw Error(std::string("CUDA emulator: ").append(where()).append(": ").append(e.what()));
        } catch (...) {
          throw Error(std::string("CUDA emulator: ").append(where()).append(": unknown exception"));
        }
      }
    }
    if (!ran) throw_stuck();
  }
}

// ---- __syncthreads() --------------------------------------------------------------------

void BlockRunner::sync_block(const char* file, unsigned line) {
  Thread& me = *threads_[current_];
  me.state = State::at_block_barrier;
  me.file = file;
  me.line = line;
  if (++block_arrived_ < size_) {
    me.fiber.yield();  // the last thread to arrive sets us runnable again
    return;
  }
  check_same_site(0, size_, "__syncthreads()");
  block_arrived_ = 0;
  for (int t = 0; t < size_; ++t) threads_[t]->state = State::runnable;
}

// Every thread of [first, first+count) waits at the same call site, or the barrier is
// divergent: two different __syncthreads() (or shuffles) would not meet on a GPU.
void BlockRunner::check_same_site(int first, int count, const char* what) const {
  const Thread& a = *threads_[first];
  for (int t = first + 1; t < first + count; ++t) {
    const Thread& b = *threads_[t];
    if (!same_site(a.file, a.line, b.file, b.line)) {
      std::ostringstream os;
      os << "divergent " << what << ": thread " << str(a.idx) << " is at " << a.file << ":"
         << a.line << " but thread " << str(b.idx) << " is at " << b.file << ":" << b.line
         << " (every thread must reach the same one; on a GPU this hangs or corrupts)";
      throw Error(os.str());
    }
  }
}

// ---- warp shuffles ----------------------------------------------------------------------

std::pair<int, int> BlockRunner::whole_warp(unsigned mask, const char* what) const {
  const int warp = current_ / warpSize;
  const int first = warp * warpSize;
  const int lanes = std::min(warpSize, size_ - first);  // the last warp may be partial
  const unsigned present = lanes == warpSize ? ~0u : (1u << lanes) - 1;
  if ((mask & present) != present) {
    std::ostringstream os;
    os << what << " mask 0x" << std::hex << mask << " leaves out lanes of warp " << std::dec
       << warp << " (lanes present: 0x" << std::hex << present << "); the emulator supports only "
       << what << "s in which every lane of the warp takes part";
    throw Error(os.str());
  }
  return {first, lanes};
}

uint64_t BlockRunner::shuffle(detail::ShuffleKind kind, unsigned mask, uint64_t value, int arg,
                              int width, const char* file, unsigned line) {
  const int warp = current_ / warpSize;
  const int lane = current_ % warpSize;
  const std::pair<int, int> whole = whole_warp(mask, "shuffle");
  const int first = whole.first, lanes = whole.second;
  BRIGADE_CHECK(width >= 1 && width <= warpSize && (width & (width - 1)) == 0,
                "shuffle width " << width << " is not a power of two in [1, 32]");
  // The source lane, as the PTX shfl instruction computes it: within a segment of `width`
  // lanes; a source outside the segment means "keep your own value".
  const int segment = lane & ~(width - 1);
  int source = lane;
  switch (kind) {
    case detail::ShuffleKind::idx: source = segment + (arg & (width - 1)); break;
    case detail::ShuffleKind::up: source = lane - arg >= segment ? lane - arg : lane; break;
    case detail::ShuffleKind::down:
      source = lane + arg < segment + width ? lane + arg : lane;
      break;
    case detail::ShuffleKind::bfly:
      source = (lane ^ arg) < segment + width ? lane ^ arg : lane;
      break;
  }
  BRIGADE_CHECK(source < lanes, "shuffle reads lane " << source << " of warp " << warp
                                    << ", which does not exist in a block of " << size_
                                    << " threads (undefined on a GPU)");

  Thread& me = *threads_[current_];
  me.state = State::at_warp_barrier;
  me.file = file;
  me.line = line;
  me.mask = mask;
  me.offered = value;
  me.source = source;
  if (++warp_arrived_[warp] < lanes) {
    me.fiber.yield();  // the last lane to arrive fills in `received` and wakes us
    return me.received;
  }
  check_same_site(first, lanes, "warp shuffle");
  for (int l = 0; l < lanes; ++l) {
    Thread& th = *threads_[first + l];
    BRIGADE_CHECK(th.mask == mask, "lanes of warp " << warp << " passed different shuffle masks (0x"
                                                    << std::hex << th.mask << " and 0x" << mask
                                                    << ")");
    th.received = threads_[first + th.source]->offered;
    th.state = State::runnable;
  }
  warp_arrived_[warp] = 0;
  return me.received;
}

// ---- warp collectives ---------------------------------------------------------------------

void BlockRunner::warp_collective(void* lane_data, detail::WarpOp op, void* context,
                                  const char* file, unsigned line) {
  const int warp = current_ / warpSize;
  const std::pair<int, int> whole = whole_warp(~0u, "warp collective");
  const int first = whole.first, lanes = whole.second;
  Thread& me = *threads_[current_];
  me.state = State::at_warp_barrier;
  me.file = file;
  me.line = line;
  me.mask = ~0u;
  me.lane_data = lane_data;
  if (++warp_arrived_[warp] < lanes) {
    me.fiber.yield();  // the last lane to arrive computes for us all and wakes us
    return;
  }
  check_same_site(first, lanes, "warp collective");
  void* data[warpSize];
  for (int l = 0; l < lanes; ++l) data[l] = threads_[first + l]->lane_data;
  warp_arrived_[warp] = 0;
  for (int l = 0; l < lanes; ++l) threads_[first + l]->state = State::runnable;
  op(context, data, lanes);  // the waiting lanes' data lives on their stacks, still suspended
}

// ---- a block that cannot make progress ----------------------------------------------------

void BlockRunner::throw_stuck() const {
  std::ostringstream os;
  os << "CUDA emulator: kernel " << config_->kernel << ", block " << str(block_idx_) << " of "
     << size_ << " threads cannot make progress (on a GPU this hangs):";
  // Consecutive threads in the same state at the same place form one line of the report.
  for (int t = 0; t < size_;) {
    const Thread& a = *threads_[t];
    int end = t + 1;
    auto same_place = [&a](const Thread& b) {
      return b.state == a.state &&
             (a.state == State::exited || same_site(a.file, a.line, b.file, b.line));
    };
    while (end < size_ && same_place(*threads_[end])) ++end;
    os << "\n  threads " << t << "-" << end - 1 << " (linear index): ";
    if (a.state == State::exited) os << "have returned from the kernel";
    else
      os << "wait at " << (a.state == State::at_block_barrier ? "__syncthreads()" : "a warp shuffle")
         << " (" << a.file << ":" << a.line << ")";
    t = end;
  }
  os << "\n__syncthreads() must be reached by every thread of the block, and a shuffle by "
        "every lane of the warp: is one inside a branch or after an early return?";
  throw Error(os.str());
}

// ---- the entry points of runtime.h --------------------------------------------------------

namespace detail {

void sync_block(const char* file, unsigned line) {
  BlockRunner::running("__syncthreads()").sync_block(file, line);
}

uint64_t shuffle(ShuffleKind kind, unsigned mask, uint64_t value, int arg, int width,
                 const char* file, unsigned line) {
  return BlockRunner::running("a warp shuffle").shuffle(kind, mask, value, arg, width, file, line);
}

void warp_collective(void* lane_data, WarpOp op, void* context, const char* file, unsigned line) {
  BlockRunner::running("a warp collective").warp_collective(lane_data, op, context, file, line);
}

void* dynamic_shared() { return BlockRunner::running("dynamic shared memory").dynamic_shared(); }

}  // namespace detail
}  // namespace brigade::emu

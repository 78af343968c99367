// BlockRunner: runs the threads of one CUDA block as fibers on the calling OS thread.
//
// Every CUDA thread of the block is a Fiber. The runner resumes them round-robin; a fiber
// runs until it reaches a barrier or returns from the kernel:
//
//   __syncthreads()   the fiber waits until all threads of the block have arrived at the
//                     same __syncthreads(); the last one to arrive releases them all.
//   warp shuffle      the fiber leaves its value in its lane's slot and waits until every
//                     lane of its warp has arrived; the last one to arrive hands each lane
//                     the slot of the lane it asked for, then releases them.
//   warp collective   the same rendezvous, for an instruction whose result mixes every
//                     lane's registers (mma.sync): each lane leaves a pointer to its own, and
//                     the last to arrive computes the instruction for the whole warp.
//
// When a whole round finds no fiber able to run while some have not finished, the block
// would hang on a GPU (a barrier inside a branch, a shuffle skipped by some lanes): the
// runner throws an Error that lists where each group of threads is waiting, instead.
//
// One runner per OS thread (thread_local), reused for every block that thread runs, so the
// fiber stacks are mapped once. __shared__ variables are `static thread_local` (emu.h):
// they belong to the block this OS thread is running, as shared memory belongs to a block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/emu/fiber.h"
#include "kernels/emu/runtime.h"

namespace brigade::emu {

class BlockRunner {
 public:
  // The runner of this OS thread (created on first use).
  static BlockRunner& for_this_thread();
  // The runner whose block is running on this OS thread; throws outside a kernel.
  static BlockRunner& running(const char* what);

  // Runs every thread of block `block_idx` to completion.
  void run(const LaunchConfig& config, uint3 block_idx, const ThreadBody& body);

  // Called from inside a fiber (through runtime.h's detail functions).
  void sync_block(const char* file, unsigned line);
  uint64_t shuffle(detail::ShuffleKind kind, unsigned mask, uint64_t value, int arg, int width,
                   const char* file, unsigned line);
  void warp_collective(void* lane_data, detail::WarpOp op, void* context, const char* file,
                       unsigned line);
  void* dynamic_shared() { return dynamic_shared_.get(); }

 private:
  enum class State : uint8_t { runnable, at_block_barrier, at_warp_barrier, exited };

  struct Thread {
    Fiber fiber;
    uint3 idx;
    State state = State::exited;
    const char* file = "";  // where it waits (barrier or shuffle call site)
    unsigned line = 0;
    unsigned mask = 0;      // shuffle: the mask it passed
    uint64_t offered = 0;   // shuffle: the value it offers
    int source = 0;         // shuffle: the lane (within the warp) it reads
    uint64_t received = 0;  // shuffle: the value handed to it
    void* lane_data = nullptr;  // warp collective: what it offers
  };

  static void thread_main(void* runner);
  [[noreturn]] void throw_stuck() const;
  std::string where() const;  // "kernel k, block (x,y,z), thread (x,y,z)"
  void check_same_site(int first, int count, const char* what) const;
  // The calling lane's warp: its first thread and how many lanes it has (the last may be
  // partial); throws, naming `what`, unless `mask` holds every lane present.
  std::pair<int, int> whole_warp(unsigned mask, const char* what) const;

  const LaunchConfig* config_ = nullptr;
  const ThreadBody* body_ = nullptr;
  uint3 block_idx_;
  int size_ = 0;     // threads in the block
  int current_ = 0;  // linear index of the thread now running
  int block_arrived_ = 0;
  std::vector<int> warp_arrived_;
  std::vector<std::unique_ptr<Thread>> threads_;  // Fibers cannot move: one allocation each
  std::vector<std::unique_ptr<FiberStack>> stacks_;
  std::unique_ptr<std::byte[]> dynamic_shared_;
  size_t dynamic_shared_bytes_ = 0;
};

}  // namespace brigade::emu

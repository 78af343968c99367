// Multiprocessors: the threads that run one emulated GPU's blocks, shared by every grid in
// flight on it, so that kernels of different streams run at the same time, as on a GPU.
//
// A grid is run by the thread that launched it into the GPU (its stream's worker), which
// runs its own grid's blocks one after another; the GPU's helper threads (threads - 1 of
// them) take blocks from every grid in flight, one block at a time and in turn, so two
// streams' grids interleave their blocks over the helpers. A grid therefore always makes
// progress on its own stream's thread, whatever the others do: a kernel of one stream that
// waits for a kernel of another (a flag in memory) is met, never starved, as on a GPU with
// room for both.
//
// This differs from brigade::ThreadPool (a CPU device's compute threads), which runs one
// parallel loop at a time, whoever calls it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brigade::emu {

class Multiprocessors {
 public:
  using BlockFn = std::function<void(int64_t block)>;

  // `threads` >= 1 host threads in all per grid: the caller's and threads - 1 helpers.
  explicit Multiprocessors(int threads);
  ~Multiprocessors();
  Multiprocessors(const Multiprocessors&) = delete;
  Multiprocessors& operator=(const Multiprocessors&) = delete;

  // Runs block(b) for every b in [0, blocks) and returns when every one it started is done.
  // Callable from several threads at once: their grids share the helpers. A block that throws
  // ends the grid: blocks not yet started are not run, and the first exception is rethrown.
  void run(int64_t blocks, const BlockFn& block);

 private:
  struct Grid;
  // Claims the next block of `grid` (with mutex_ held); false when none is left.
  bool claim(Grid& grid, int64_t* block);
  // Runs a claimed block (without the lock), then accounts for it.
  void run_claimed(Grid& grid, int64_t block);
  void helper_loop();

  std::mutex mutex_;                  // guards everything below
  std::condition_variable work_;      // helpers wait here for a grid with blocks to start
  std::deque<Grid*> open_;            // grids in flight with blocks not yet started
  size_t turn_ = 0;                   // which open grid a helper serves next
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace brigade::emu

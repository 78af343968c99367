#include "kernels/emu/multiprocessors.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace brigade::emu {

struct Multiprocessors::Grid {
  const BlockFn* block = nullptr;
  int64_t blocks = 0;
  int64_t next = 0;     // the first block not yet started
  int64_t running = 0;  // blocks started and not finished
  std::exception_ptr error;
  std::condition_variable finished;  // the caller waits here for the helpers' blocks
};

Multiprocessors::Multiprocessors(int threads) {
  const int helpers = std::max(threads, 1) - 1;
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] { helper_loop(); });
}

Multiprocessors::~Multiprocessors() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : helpers_) t.join();
}

void Multiprocessors::run(int64_t blocks, const BlockFn& block) {
  if (blocks <= 0) return;
  if (helpers_.empty()) {  // the caller alone: no bookkeeping
    for (int64_t b = 0; b < blocks; ++b) block(b);
    return;
  }
  Grid grid;
  grid.block = &block;
  grid.blocks = blocks;
  std::unique_lock lock(mutex_);
  open_.push_back(&grid);
  work_.notify_all();
  int64_t b = 0;
  while (claim(grid, &b)) {
    lock.unlock();
    run_claimed(grid, b);
    lock.lock();
  }
  grid.finished.wait(lock, [&] { return grid.running == 0; });
  if (grid.error) std::rethrow_exception(grid.error);
}

bool Multiprocessors::claim(Grid& grid, int64_t* block) {
  if (grid.next >= grid.blocks) return false;
  *block = grid.next++;
  ++grid.running;
  if (grid.next == grid.blocks) std::erase(open_, &grid);  // nothing more to hand out
  return true;
}

void Multiprocessors::run_claimed(Grid& grid, int64_t block) {
  std::exception_ptr error;
  try {
    (*grid.block)(block);
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard lock(mutex_);
  if (error && !grid.error) {
    grid.error = error;
    if (grid.next < grid.blocks) {  // a failed grid starts nothing more
      grid.next = grid.blocks;
      std::erase(open_, &grid);
    }
  }
  if (--grid.running == 0) grid.finished.notify_all();
}

void Multiprocessors::helper_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !open_.empty(); });
    if (stopping_) return;
    Grid& grid = *open_[turn_++ % open_.size()];  // in turn: grids of two streams interleave
    int64_t b = 0;
    if (!claim(grid, &b)) continue;
    lock.unlock();
    run_claimed(grid, b);
    lock.lock();
  }
}

}  // namespace brigade::emu

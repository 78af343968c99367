// A grid: checking a launch, and spreading its blocks over threads.
#include <cstdint>
#include <sstream>

#include "engine/error.h"
#include "engine/thread_pool.h"
#include "kernels/emu/block.h"
#include "kernels/emu/multiprocessors.h"
#include "kernels/emu/runtime.h"

namespace brigade::emu {

namespace {
std::string str(dim3 v) {
  std::ostringstream os;  // (GCC 12 warns falsely about chains of std::string operator+)
  os << "(" << v.x << "," << v.y << "," << v.z << ")";
  return os.str();
}
}  // namespace

void check_launch(const LaunchConfig& c) {
  std::ostringstream os;
  os << "kernel " << c.kernel << " launched with grid " << str(c.grid) << ", block "
     << str(c.block) << ", " << c.dynamic_shared_bytes << " B dynamic shared memory";
  const std::string launch = os.str();
  BRIGADE_CHECK(c.grid.x >= 1 && c.grid.y >= 1 && c.grid.z >= 1 && c.block.x >= 1 &&
                    c.block.y >= 1 && c.block.z >= 1,
                launch << ": every grid and block dimension must be at least 1");
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  BRIGADE_CHECK(threads <= kMaxThreadsPerBlock,
                launch << ": " << threads << " threads per block, the limit is "
                       << kMaxThreadsPerBlock);
  BRIGADE_CHECK(c.block.z <= kMaxBlockDimZ,
                launch << ": block.z is at most " << kMaxBlockDimZ);
  BRIGADE_CHECK(c.grid.x <= 0x7fffffffu && c.grid.y <= kMaxGridDimYZ && c.grid.z <= kMaxGridDimYZ,
                launch << ": grid.x is at most 2^31-1, grid.y and grid.z at most "
                       << kMaxGridDimYZ);
  BRIGADE_CHECK(c.dynamic_shared_bytes <= kMaxDynamicSharedBytes,
                launch << ": dynamic shared memory is at most "
                       << format_bytes(kMaxDynamicSharedBytes)
                       << " without an opt-in the emulator does not model");
}

namespace {
// Runs block number `b` (x fastest, then y, then z) on this OS thread's BlockRunner.
void run_block(const LaunchConfig& config, const ThreadBody& body, int64_t b) {
  const dim3 g = config.grid;
  const uint3 idx{static_cast<unsigned>(b % g.x), static_cast<unsigned>(b / g.x % g.y),
                  static_cast<unsigned>(b / (int64_t{g.x} * g.y))};
  BlockRunner::for_this_thread().run(config, idx, body);
}

int64_t block_count(const LaunchConfig& config) {
  return int64_t{config.grid.x} * config.grid.y * config.grid.z;
}
}  // namespace

void run_grid(const LaunchConfig& config, const ThreadBody& body, ThreadPool* pool) {
  check_launch(config);
  // Blocks are independent (CUDA gives no order among them), so any split over OS threads
  // is valid; each OS thread runs its blocks one at a time on its own BlockRunner.
  auto run_blocks = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) run_block(config, body, b);
  };
  if (pool != nullptr)
    pool->parallel_for(block_count(config), run_blocks);
  else
    run_blocks(0, block_count(config));
}

void run_grid(const LaunchConfig& config, const ThreadBody& body, Multiprocessors& gpu) {
  check_launch(config);
  gpu.run(block_count(config), [&](int64_t b) { run_block(config, body, b); });
}

}  // namespace brigade::emu

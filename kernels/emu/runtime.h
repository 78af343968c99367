// The emulator's runtime: launch shapes, running a grid, and the calls that emulated
// kernel code makes into it (barriers, shuffles, shared memory).
//
// Kernel sources never include this directly: they include kernels/emu/kernel.h, which
// brings in emu.h (the CUDA vocabulary written on top of this file) under a host compiler.
// Tests and the launch macros use run_grid; the launch on a CPU stream is cpu_launch.h, the
// launch on an emulated GPU's stream cudart/launch.h. This file, fiber.h and block.h are the
// emulator's core (brigade_emu_core): beneath the engine, on brigade_base alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace brigade {
class ThreadPool;
}  // namespace brigade

namespace brigade::emu {

class Multiprocessors;

// CUDA's built-in vector types, as vector_types.h spells them. They live in brigade::emu,
// not the global namespace, so that a program linking both compilations of a kernel (and
// CUDA's own ::dim3) has one definition of each name.
struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: implicit, as in CUDA
  constexpr operator uint3() const { return {x, y, z}; }
};

inline constexpr int warpSize = 32;

// The limits a launch is checked against: those of every GPU since compute capability 3.0
// (and sm_80/sm_90, which we build for). Dynamic shared memory above 48 KiB needs an opt-in
// attribute on a GPU (cudaFuncSetAttribute), which the emulator does not model.
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxBlockDimZ = 64;
inline constexpr unsigned kMaxGridDimYZ = 65535;
inline constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;

struct LaunchConfig {
  std::string kernel;  // for messages: the name written in the launch
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
};

// The body of one CUDA thread: calls the kernel with the launch's arguments. Run once per
// thread of the grid, with the built-in indices set (see detail::builtins).
using ThreadBody = std::function<void()>;

// Throws brigade::Error unless the launch is valid on a GPU: every dimension >= 1, at most
// 1024 threads per block, block.z <= 64, grid.y and grid.z <= 65535, dynamic shared memory
// <= 48 KiB. The message names the kernel and the shape.
void check_launch(const LaunchConfig& config);

// Runs every block of the grid, and returns when all are done. Blocks are spread over
// `pool`'s threads when one is given (a CPU device's compute threads), else run one after
// another on the calling thread. Throws brigade::Error naming the kernel, block and thread
// when a kernel throws, a barrier or shuffle is divergent, or the launch is invalid.
void run_grid(const LaunchConfig& config, const ThreadBody& body, ThreadPool* pool = nullptr);
// The same on an emulated GPU's threads (multiprocessors.h): the calling thread runs blocks of
// this grid while the GPU's helpers share theirs among every grid in flight, so grids launched
// from two streams run at the same time.
void run_grid(const LaunchConfig& config, const ThreadBody& body, Multiprocessors& gpu);

namespace detail {

// The built-in variables of the CUDA thread now running on this OS thread. The block
// runner sets them before each switch into a fiber; emu.h reads them through
// threadIdx, blockIdx, blockDim and gridDim.
struct Builtins {
  dim3 grid_dim;
  dim3 block_dim;
  uint3 block_idx;
  uint3 thread_idx;
};
extern thread_local Builtins builtins;

// __syncthreads(): `file:line` is where it was called, to tell divergent barriers apart.
void sync_block(const char* file, unsigned line);

// A warp shuffle: the calling lane offers `value` and receives the value of the lane that
// `kind` and `arg` name (src lane, delta or xor mask), within segments of `width` lanes.
enum class ShuffleKind : uint8_t { idx, up, down, bfly };
uint64_t shuffle(ShuffleKind kind, unsigned mask, uint64_t value, int arg, int width,
                 const char* file, unsigned line);

// A warp-wide instruction computed once for the whole warp: every lane of the calling warp
// offers `lane_data` and waits; the last lane to arrive calls op(context, the lanes' data in
// lane order, lanes), then every lane goes on. Every lane takes part, at one call site.
using WarpOp = void (*)(void* context, void* const* lane_data, int lanes);
void warp_collective(void* lane_data, WarpOp op, void* context, const char* file, unsigned line);

// The launch's dynamic shared memory (dynamic_shared_bytes, at least 16-byte aligned).
void* dynamic_shared();

}  // namespace detail
}  // namespace brigade::emu

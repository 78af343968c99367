// The CUDA language, emulated for a host compiler.
//
// Included (through kernels/emu/kernel.h) by a kernels/cuda/*.cu file when it is compiled as
// C++: the file's kernels then run on the CPU through the emulator's runtime (runtime.h), on
// a CPU stream (cpu_launch.h).
// Everything a kernel names unqualified lives in brigade::emu, where the .cu's code is
// (`namespace brigade::BRIGADE_KERNEL_NAMESPACE`, which is brigade::emu here), built-in
// variables included; only the qualifiers are macros, as they are keywords in CUDA. (The
// built-ins cannot be macros: CUDA's own headers, which engine/ headers include in a CUDA
// build, use `gridDim` and `blockDim` as parameter names.)
#pragma once

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/emu/cpu_launch.h"
#include "kernels/emu/intrinsics.h"
#include "kernels/emu/runtime.h"

// ---- qualifiers -------------------------------------------------------------------------
// CUDA headers, if some header included them first, define these as empty for a host
// compiler; we redefine them, and CUDA headers included later keep ours.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// Shared memory belongs to the block being run. A block's threads are fibers on one OS
// thread, and an OS thread runs one block at a time: a function-local `static thread_local`
// is exactly one variable per running block. (Like CUDA's, it is not initialised per block.)
#define __shared__ static thread_local

// ---- the kernel-writing contract (see kernel.h for the nvcc side) ---------------------------
#define BRIGADE_KERNEL_NAMESPACE emu

// Declares `T* name` pointing at the launch's dynamic shared memory (the `smem` bytes).
#define BRIGADE_DYNAMIC_SHARED(T, name) \
  T* name = static_cast<T*>(::brigade::emu::detail::dynamic_shared())

// BRIGADE_LAUNCH(kernel, grid, block, smem, stream, args...): enqueues the grid on the CPU
// stream. The arguments are converted to the kernel's parameter types and copied now, as a
// CUDA launch copies them.
#define BRIGADE_LAUNCH(kernel, grid, block, smem, stream, ...)                              \
  ::brigade::emu::launch_kernel((stream), #kernel, ::brigade::emu::dim3(grid),             \
                                ::brigade::emu::dim3(block), static_cast<size_t>(smem), \
                                kernel __VA_OPT__(, ) __VA_ARGS__)

// BRIGADE_EXTENT(pointer, elements), written in place of a pointer argument of BRIGADE_LAUNCH:
// the kernel reads or writes `elements` elements from `pointer`, no more. A launch on an
// emulated GPU checks that they lie within the pointer's allocation (cudart/launch.h); under
// nvcc it is the pointer itself, so it costs nothing on a GPU.
#define BRIGADE_EXTENT(pointer, elements) \
  ::brigade::emu::make_extent((pointer), static_cast<int64_t>(elements), #pointer)

// BRIGADE_INDIRECT(pointer, elements, written), before a BRIGADE_LAUNCH on the same thread: the
// kernel also reads (or, `written`, writes) `elements` elements from `pointer`, which it finds
// in a table in device memory rather than among its arguments (a multi-tensor update). A launch
// on an emulated GPU checks and records it as it does an argument's extent (its bounds, the
// happens-before check); a launch on a CPU stream drops it, and under nvcc it is nothing.
#define BRIGADE_INDIRECT(pointer, elements, written)                                      \
  ::brigade::emu::declare_indirect((pointer), static_cast<int64_t>(elements), sizeof(*(pointer)), \
                                   (written), #pointer)

namespace brigade::emu {

// What BRIGADE_EXTENT makes: the pointer, which the kernel's parameter is converted from, and
// what the launch checks on an emulated GPU.
template <class T>
struct Extent {
  T* pointer;
  int64_t elements;
  const char* written_as;  // the argument as the launch spells it: "y", "out + offset"
  operator T*() const { return pointer; }  // NOLINT: implicit, it is the argument
};
template <class T>
Extent<T> make_extent(T* pointer, int64_t elements, const char* written_as) {
  return Extent<T>{pointer, elements, written_as};
}

// ---- built-in variables -------------------------------------------------------------------
// Read-only views of the indices of the CUDA thread now running on this OS thread (the
// block runner sets detail::builtins before each switch into a fiber).
inline thread_local const uint3& threadIdx = detail::builtins.thread_idx;
inline thread_local const uint3& blockIdx = detail::builtins.block_idx;
inline thread_local const dim3& blockDim = detail::builtins.block_dim;
inline thread_local const dim3& gridDim = detail::builtins.grid_dim;

// The ThreadBody of a launch: the kernel and a copy of its arguments.
template <class... Params, class... Args>
ThreadBody bind_kernel(void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  return [kernel, params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
    std::apply(kernel, params);
  };
}

// What BRIGADE_INDIRECT declares, held per host thread until its next launch takes it.
struct IndirectAccess {
  const void* pointer;
  int64_t elements;
  size_t element_bytes;
  bool written;
  const char* written_as;
};
inline thread_local std::vector<IndirectAccess> pending_indirect;
inline void declare_indirect(const void* pointer, int64_t elements, size_t element_bytes,
                             bool written, const char* written_as) {
  pending_indirect.push_back({pointer, elements, element_bytes, written, written_as});
}
inline std::vector<IndirectAccess> take_indirect() { return std::exchange(pending_indirect, {}); }

template <class... Params, class... Args>
void launch_kernel(const Stream& stream, const char* name, dim3 grid, dim3 block, size_t smem,
                   void (*kernel)(Params...), Args&&... args) {
  (void)take_indirect();  // a CPU stream's memory is the host's: nothing to check
  enqueue_grid(stream, LaunchConfig{name, grid, block, smem},
               bind_kernel(kernel, std::forward<Args>(args)...));
}

// The same, synchronously on the calling thread (tests of the emulator itself).
template <class... Params, class... Args>
void run_kernel(const char* name, dim3 grid, dim3 block, size_t smem, void (*kernel)(Params...),
                Args&&... args) {
  run_grid(LaunchConfig{name, grid, block, smem}, bind_kernel(kernel, std::forward<Args>(args)...));
}

// ---- synchronisation ------------------------------------------------------------------------

// Where a kernel calls a barrier or a shuffle, so that the emulator can tell two call sites
// apart (a barrier that lanes reach at different lines would hang on a GPU). A defaulted
// argument of this type is built at the caller's line: __builtin_FILE and __builtin_LINE in a
// default argument give the call site, in GCC and clang alike. (std::source_location does the
// same, but clang before 15 cannot build libstdc++'s.)
struct CallSite {
  const char* file;
  unsigned line;
  constexpr CallSite(const char* file_ = __builtin_FILE(), unsigned line_ = __builtin_LINE())
      : file(file_), line(line_) {}
};

inline void __syncthreads(CallSite at = {}) {
  detail::sync_block(at.file, at.line);
}

// A shuffle moves the bits of a value of up to 8 bytes (int, unsigned, float, double, ...).
template <class T>
T shuffle_as(detail::ShuffleKind kind, unsigned mask, T var, int arg, int width,
             const CallSite& at) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "warp shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = detail::shuffle(kind, mask, bits, arg, width, at.file, at.line);
  std::memcpy(&var, &bits, sizeof(T));
  return var;
}

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              CallSite at = {}) {
  return shuffle_as(detail::ShuffleKind::idx, mask, var, src_lane, width, at);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 CallSite at = {}) {
  return shuffle_as(detail::ShuffleKind::up, mask, var, static_cast<int>(delta), width, at);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   CallSite at = {}) {
  return shuffle_as(detail::ShuffleKind::down, mask, var, static_cast<int>(delta), width, at);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  CallSite at = {}) {
  return shuffle_as(detail::ShuffleKind::bfly, mask, var, lane_mask, width, at);
}

// A warp-wide instruction, emulated: `lane` (this lane's registers, of type Lane) is offered to
// the warp's rendezvous, and the last lane to arrive calls op(lanes' Lane pointers in lane
// order, lanes) once for the whole warp — an instruction such as mma.sync, whose result mixes
// every lane's registers, in one rendezvous instead of a shuffle per register. An emulator
// facility, not CUDA: a .cu uses it only where it is not compiled by nvcc.
template <class Lane>
void warp_collective(Lane& lane, void (*op)(Lane* const* lanes, int count), CallSite at = {}) {
  using Op = void (*)(Lane* const*, int);
  Op chosen = op;  // the context: an object, so no cast between function and data pointers
  const auto call = [](void* context, void* const* data, int count) {
    Lane* lanes[warpSize];
    for (int l = 0; l < count; ++l) lanes[l] = static_cast<Lane*>(data[l]);
    (*static_cast<Op*>(context))(lanes, count);
  };
  detail::warp_collective(&lane, call, &chosen, at.file, at.line);
}

// A warp barrier: a shuffle whose value nobody uses.
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       CallSite at = {}) {
  shuffle_as(detail::ShuffleKind::idx, mask, 0, 0, warpSize, at);
}

}  // namespace brigade::emu

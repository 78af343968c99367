// The third compilation of a kernels/cuda/*.cu file, in emulated-GPU builds (-Dcuda=emulated):
// the native kernels of brigade::cuda, launched on emulated GPU streams.
//
//   nvcc                 brigade::cuda, kernel<<<...>>> on a real GPU          (kernel.h)
//   emulated GPU         brigade::cuda, the same launch through the emulated   (this file)
//                        CUDA runtime: the stream's cudaStream_t, the current
//                        device's rules, cudaGetLastError() after it
//   emulator on a CPU    brigade::emu, the grid as a task of a CPU stream       (emu.h)
//
// The kernel code itself is the emulator's (emu.h: fibers, barriers, shuffles); what differs
// from the CPU-stream compilation is the namespace and the launch, which goes through the
// CUDA runtime API exactly where nvcc's <<<>>> does.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/emu/cudart/launch.h"
#include "kernels/emu/emu.h"

#undef BRIGADE_KERNEL_NAMESPACE
#define BRIGADE_KERNEL_NAMESPACE cuda

// The CUDA vocabulary of emu.h (threadIdx, __syncthreads, dim3, atomics, ...) is visible in
// brigade::cuda as it is in brigade::emu. Names the .cu declares itself are found first.
namespace brigade::cuda {
using namespace ::brigade::emu;  // NOLINT(google-build-using-namespace)
}

namespace brigade::emu {

template <class T>
inline constexpr bool is_extent = false;
template <class T>
inline constexpr bool is_extent<Extent<T>> = true;

// A pointer parameter is a read of its allocation when it points to const, else a write: the
// happens-before check (kernels/emu/cudart/hb.h) takes the kernel's signature at its word. An
// argument written BRIGADE_EXTENT(p, n) also carries the extent the launch declares.
template <class Param, class Arg>
void collect_pointer(std::vector<PointerArgument>& pointers, int position, const Arg& arg) {
  if constexpr (std::is_pointer_v<Param>) {
    const Param converted = arg;
    PointerArgument p(static_cast<const void*>(converted),
                      !std::is_const_v<std::remove_pointer_t<Param>>);
    p.position = position;
    if constexpr (is_extent<Arg>) {
      p.elements = arg.elements;
      p.element_bytes = sizeof(*arg.pointer);
      p.written_as = arg.written_as;
    }
    pointers.push_back(p);
  }
}

template <class... Params, class... Args, size_t... I>
std::vector<PointerArgument> collect_pointers(std::index_sequence<I...>, const Args&... args) {
  std::vector<PointerArgument> pointers;
  (collect_pointer<std::decay_t<Params>>(pointers, static_cast<int>(I) + 1, args), ...);
  return pointers;
}

// The launch of a native kernel on an emulated GPU: arguments converted to the kernel's
// parameter types and copied now, pointer arguments handed to the runtime to check, each
// marked read or written by its parameter's type, with its extent where the launch declares it.
template <class... Params, class... Args>
cudaError_t launch_native(cudaStream_t stream, const char* name, dim3 grid, dim3 block,
                          size_t smem, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  std::vector<PointerArgument> pointers =
      collect_pointers<Params...>(std::index_sequence_for<Params...>{}, args...);
  for (const IndirectAccess& a : take_indirect()) {  // BRIGADE_INDIRECT (emu.h)
    PointerArgument p(a.pointer, a.written);
    p.elements = a.elements;
    p.element_bytes = a.element_bytes;
    p.written_as = a.written_as;
    pointers.push_back(p);
  }
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  return launch_on_gpu(stream, LaunchConfig{name, grid, block, smem},
                       [kernel, params = std::move(params)] { std::apply(kernel, params); },
                       std::move(pointers));
}

}  // namespace brigade::emu

#undef BRIGADE_LAUNCH
#define BRIGADE_LAUNCH(kernel, grid, block, smem, stream, ...)                                 \
  do {                                                                                         \
    const cudaStream_t brigade_launch_stream_ =                                                \
        ::brigade::detail::native_launch_stream((stream), #kernel);                            \
    (void)::brigade::emu::launch_native(brigade_launch_stream_, #kernel,                       \
                                        ::brigade::emu::dim3(grid), ::brigade::emu::dim3(block), \
                                        static_cast<size_t>(smem),                             \
                                        kernel __VA_OPT__(, ) __VA_ARGS__);                    \
    BRIGADE_CUDA_CHECK(cudaGetLastError());                                                    \
  } while (0)

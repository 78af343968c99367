// The first include of every kernels/cuda/*.cu file: one source, two compilations.
//
//   nvcc (__CUDACC__)   CUDA itself; BRIGADE_LAUNCH is kernel<<<grid, block, smem, s>>>(...)
//                       on the stream's cudaStream_t, followed by a checked
//                       cudaGetLastError(); the code lives in brigade::cuda.
//   host compiler       the emulator (emu.h); BRIGADE_LAUNCH enqueues the grid on a CPU
//                       stream; the code lives in brigade::emu.
// In an emulated-GPU build (-Dcuda=emulated) the brigade::cuda compilation is made by the host
// compiler too (BRIGADE_EMULATED_GPU_KERNELS): emulated_gpu.h launches through the emulated
// CUDA runtime instead of <<<>>>, with the same stream, current device and error check.
//
// The contract a .cu follows (kernels/emu/README.md has a worked example):
//   #include "kernels/emu/kernel.h"
//   namespace brigade::BRIGADE_KERNEL_NAMESPACE {
//   __global__ void k(...) { ... BRIGADE_DYNAMIC_SHARED(float, buf); ... }
//   void launcher(..., const Stream& stream) { BRIGADE_LAUNCH(k, grid, block, smem, stream, args...); }
// where a pointer argument may be BRIGADE_EXTENT(p, n): the kernel touches p[0, n), no more,
// and BRIGADE_INDIRECT(p, n, written) before the launch declares memory it reaches through a
// table in device memory instead of an argument.
//   }
// Launching on a stream of the wrong kind (a native kernel on a CPU stream, an emulated
// one on a CUDA stream) throws brigade::Error naming the kernel and the stream.
#pragma once

#if defined(__CUDACC__) || defined(BRIGADE_EMULATED_GPU_KERNELS)

#include "engine/error.h"
#include "engine/stream.h"

namespace brigade::detail {
// The cudaStream_t to launch a native kernel on, with the stream's device made current on
// this thread (Stream::cuda_handle does that: a launch fails unless its stream's device is
// current). A CPU stream is an error, not a fallback.
inline cudaStream_t native_launch_stream(const Stream& stream, const char* kernel) {
  BRIGADE_CHECK(stream.device().is_cuda(),
                "kernel " << kernel << ": a native CUDA launch needs a CUDA stream, got "
                          << stream.str()
                          << " (a CPU stream runs the emulated kernel, brigade::emu::...)");
  return stream.cuda_handle();
}
}  // namespace brigade::detail

#endif

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define BRIGADE_KERNEL_NAMESPACE cuda

// Declares `T* name` pointing at the launch's dynamic shared memory. Every kernel of a
// file shares the one extern array (CUDA gives them the same address anyway).
#define BRIGADE_DYNAMIC_SHARED(T, name)                                           \
  extern __shared__ __align__(16) unsigned char brigade_dynamic_shared_bytes_[]; \
  T* name = reinterpret_cast<T*>(brigade_dynamic_shared_bytes_)

#define BRIGADE_LAUNCH(kernel, grid, block, smem, stream, ...)                               \
  do {                                                                                       \
    const cudaStream_t brigade_launch_stream_ =                                              \
        ::brigade::detail::native_launch_stream((stream), #kernel);                          \
    kernel<<<(grid), (block), (smem), brigade_launch_stream_>>>(__VA_ARGS__);                \
    BRIGADE_CUDA_CHECK(cudaGetLastError());                                                  \
  } while (0)

// A pointer argument with the number of elements the kernel touches from it: checked against
// its allocation by an emulated GPU's launch (emu.h), the bare pointer here.
#define BRIGADE_EXTENT(pointer, elements) (pointer)
// Memory a kernel reaches through a device-side table (emu.h): checked on an emulated GPU only.
#define BRIGADE_INDIRECT(pointer, elements, written) ((void)0)

#elif defined(BRIGADE_EMULATED_GPU_KERNELS)

#include "kernels/emu/emulated_gpu.h"

#else

#include "kernels/emu/emu.h"

#endif

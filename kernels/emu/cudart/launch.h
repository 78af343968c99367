// The kernel launch of an emulated GPU: what `kernel<<<grid, block, smem, stream>>>(args)`
// becomes when a kernels/cuda/*.cu file is compiled for emulated GPUs (emulated_gpu.h).
#pragma once

#include <vector>

#include "kernels/emu/cudart/include/cuda_runtime_api.h"
#include "kernels/emu/runtime.h"

namespace brigade::emu {

// Enqueues the grid on an emulated GPU stream and returns what a launch returns (the error is
// also the thread's last error, read by the cudaGetLastError() after every launch):
//   cudaErrorInvalidResourceHandle  the stream belongs to a device other than the calling
//                                   thread's current one ("a kernel launch will fail if it is
//                                   issued to a stream that is not associated to the current
//                                   device", CUDA Programming Guide), or is not live;
//   cudaErrorInvalidConfiguration   the shape is invalid on a GPU (check_launch).
// `pointers` are the kernel's pointer arguments: one into another GPU's memory without peer
// access from this one, or into pageable host memory, faults the GPU when the kernel runs
// (cudaErrorIllegalAddress at the next synchronising call), as the GPU's memory unit would.
// Each is also an access of its allocation for the happens-before check (hb.h): a read when
// the parameter points to const, a write otherwise. One whose extent the launch declares
// (BRIGADE_EXTENT) faults the GPU the same way unless the whole extent lies in the allocation
// the pointer starts in: the launch, the argument, the allocation and the overrun named.
struct PointerArgument {
  PointerArgument(const void* p, bool writes = true) : pointer(p), written(writes) {}  // NOLINT
  const void* pointer;
  bool written;
  int position = 0;             // among the kernel's arguments, from 1 (0: not known)
  int64_t elements = -1;        // declared by BRIGADE_EXTENT; -1: not declared
  size_t element_bytes = 0;     // sizeof the element type
  const char* written_as = "";  // the argument as the launch spells it
};
cudaError_t launch_on_gpu(cudaStream_t stream, LaunchConfig config, ThreadBody body,
                          std::vector<PointerArgument> pointers);

}  // namespace brigade::emu

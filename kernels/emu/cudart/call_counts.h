// How often the host called each entry point of the emulated CUDA runtime and libraries, and
// the classes of call a step's budget is made of (cuda_emulation.h's CallCounts). Internal to
// kernels/emu/: the cudart, vendor and NCCL emulations count here; tests and tools read the
// table through call_counts().
//
// One small map under its own mutex, taken last (inside Emulation::mutex where a call holds
// it): a lookup by a literal name, no allocation once a name has been seen. An emulated call
// costs microseconds at least; this costs tens of nanoseconds.
#pragma once

namespace brigade::emu::gpu {

// Counts one call of `entry_point` ("cudaMemcpyAsync", "cudnnConvolutionForward"): a string
// literal, the API's own name. Every exported function of the emulations calls this first, with
// the name it was called by (a wrapper such as cudaMallocHost counts once, as itself).
void count_call(const char* entry_point);
// The classes of call, counted where the emulation can tell (a cudaMemcpyAsync blocks the host
// only when it copies to pageable memory; a library call runs only when its checks pass).
void count_kernel_launch();  // a grid enqueued on a stream (<<<>>>, i.e. cudaLaunchKernel)
void count_library_call();   // a cuBLAS, cuDNN or NCCL call that enqueued work on a stream
void count_graph_launch();   // cudaGraphLaunch: an instantiated graph enqueued on a stream
void count_host_block();     // a call that waited, on the host, for work of a GPU to finish

}  // namespace brigade::emu::gpu

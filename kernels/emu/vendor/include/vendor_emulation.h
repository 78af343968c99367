// What emulated cuBLAS and cuDNN offer beyond NVIDIA's API: for tests of the code above the
// libraries. Not part of CUDA; only tests include it, in emulated builds (BRIGADE_CUDA_EMULATED).
#pragma once

#include <cstdint>
#include <functional>

namespace brigade::emu::vendor {

// Called inside every cuBLAS or cuDNN call that enqueues work, on the calling host thread,
// after the caller's own locks (if any) and before the library checks its handle, with no
// lock of the emulation held: a test can hold a call there to see whether another host
// thread gets into a library call on the same device at the same time. Empty: no hook.
void set_library_call_hook(std::function<void(const char* call)> hook);

// How many cuDNN convolution passes have executed each algorithm, by pass and algorithm
// number, since the process started: shows which algorithm a fallback ended on.
struct AlgorithmRuns {
  uint64_t forward[8] = {}, backward_data[6] = {}, backward_filter[7] = {};
};
AlgorithmRuns cudnn_algorithm_runs();

}  // namespace brigade::emu::vendor

// A grid launched on a CPU stream: what BRIGADE_LAUNCH is in the brigade::emu compilation of
// a kernels/cuda/*.cu file (emu.h). The one part of the emulator that knows brigade::Stream,
// so it is built above the engine (brigade_kernels_emu); fibers, blocks and the grid runner
// beneath it (runtime.h) know only brigade_base. cudart/launch.h is the same for a grid on
// an emulated GPU's cudaStream_t.
#pragma once

#include "kernels/emu/runtime.h"

namespace brigade {
class Stream;
}  // namespace brigade

namespace brigade::emu {

// Checks the launch now, then enqueues run_grid on a CPU stream (over its device's compute
// threads), so the grid runs in stream order. A CUDA stream is an error: an emulated kernel
// cannot run on a GPU, and a native one must be used there.
void enqueue_grid(const Stream& stream, LaunchConfig config, ThreadBody body);

}  // namespace brigade::emu

// <cuda_runtime.h> of an emulated build: the runtime API (cuda_runtime_api.h). Kernel
// sources do not include it there; they are compiled through kernels/emu/emulated_gpu.h.
#pragma once

#include "cuda_runtime_api.h"

// The launchers of every kernels/cuda/*.cu, declared in both of their namespaces. Include
// this header to call a hand-written kernel (or to define one: every .cu includes it).
//
// Each .cu is compiled twice (kernels/emu/README.md): natively (nvcc, or the host compiler
// for emulated GPUs) into brigade::cuda, for CUDA streams, and through the CPU emulator into
// brigade::emu, for CPU streams. A CUDA build links both into one program, so each launcher
// exists twice under two names:
//
//   brigade::cuda::relu_forward   CUDA streams (BRIGADE_HAVE_CUDA builds)
//   brigade::emu::relu_forward    CPU streams (every build)
//
// The .cu gets its namespace from BRIGADE_KERNEL_NAMESPACE (kernels/emu/kernel.h). Callers
// need names they can write, so each <op>.h here is a plain list of declarations, written
// once, and this header includes every list into each of the two namespaces below. The
// lists include nothing themselves: the types they use are included here, first.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cuda/cross_entropy_result.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/dropout_mask.h"
#include "kernels/micro_batch_tally.h"
#include "kernels/optimizer_params.h"
#include "kernels/optimizer_scalars.h"
#include "kernels/shapes.h"
#include "kernels/tensor_slot.h"

namespace brigade {
class Stream;
}

// The emulator's compilation: launches are grids on a CPU stream.
namespace brigade::emu {
#include "kernels/cuda/lessons.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/bf16_values.h"
#include "kernels/cuda/pixels.h"
#include "kernels/cuda/relu.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/dense.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/maxpool2d.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/optimizers.h"
#include "kernels/cuda/step_verdict.h"
}  // namespace brigade::emu

// The native compilation: launches on a CUDA stream.
#if defined(BRIGADE_HAVE_CUDA)
namespace brigade::cuda {
#include "kernels/cuda/lessons.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/bf16_values.h"
#include "kernels/cuda/pixels.h"
#include "kernels/cuda/relu.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/dense.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/maxpool2d.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/optimizers.h"
#include "kernels/cuda/step_verdict.h"
}  // namespace brigade::cuda
#endif

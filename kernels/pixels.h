// A pixel byte as the float a model reads: b / 255, in [0, 1] (torchvision's ToTensor). The
// one definition that the host decode (tools/data/batches.cpp: a batch written as floats in
// place), the CPU branch of ops::decode_pixels and its CUDA kernel (kernels/cuda/pixels.cu)
// all call, so that a batch staged as bytes and decoded on a GPU holds the bits of a batch
// decoded on the host.
//
// Why the bits agree: b is exact in float, and IEEE-754 division rounds the exact quotient to
// nearest, one correct answer on every machine. nvcc divides floats that way unless it is told
// otherwise (-prec-div=false, or --use_fast_math, which implies it): the build passes neither
// (meson.build's CUDA arguments), and must not.
#pragma once

#include <cstdint>

#include "engine/philox.h"  // BRIGADE_HD

namespace brigade {

BRIGADE_HD inline float pixel_value(uint8_t b) { return static_cast<float>(b) / 255.0f; }

}  // namespace brigade

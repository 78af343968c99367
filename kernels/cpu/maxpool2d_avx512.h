// The AVX-512 max-pool for 2x2 windows at stride 2 without padding (every pool of the
// question's network), one plane at a time; called only when kernel_isa() is avx512.
// Bit-identical to kernels/reference/maxpool2d.h (ties and NaNs included), like the portable
// loops of maxpool2d.cpp.
#pragma once

#include <cstdint>

#include "kernels/shapes.h"

namespace brigade::cpu::avx512 {

// xp: one (H, W) plane  yp, ap: its (P, Q) outputs and argmax
void maxpool2x2_forward_plane(const float* xp, float* yp, int32_t* ap, const Pool2dShape& s);

// dyp, ap: one plane's (P, Q) gradients and argmax  dxp: its (H, W) input gradient,
// overwritten (the cells no window covers get 0)  yp: the plane's (P, Q) outputs, or nullptr:
// a window's gradient counts only where its output is > 0 (maxpool2d.h)
void maxpool2x2_backward_plane(const float* dyp, const int32_t* ap, float* dxp,
                               const Pool2dShape& s, const float* yp);

}  // namespace brigade::cpu::avx512

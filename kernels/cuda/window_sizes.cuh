// The sizes a sliding-window kernel (im2col, col2im, max pooling) indexes with, as Index:
// int32_t when every index fits (launch.cuh's with_index_type), else int64_t. Built from a
// Conv2dShape or a Pool2dShape (kernels/shapes.h) at the top of the kernel. Included by a .cu
// after kernels/emu/kernel.h.
#pragma once

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

template <class Index>
struct WindowSizes {
  Index N, C, H, W;  // input (N, C, H, W)
  Index R, S;        // window R×S
  Index P, Q;        // output P×Q per plane
  Index stride, pad_h, pad_w;

  template <class Shape>
  __device__ explicit WindowSizes(const Shape& s)
      : N(static_cast<Index>(s.N)), C(static_cast<Index>(s.C)), H(static_cast<Index>(s.H)),
        W(static_cast<Index>(s.W)), R(static_cast<Index>(s.R)), S(static_cast<Index>(s.S)),
        P(static_cast<Index>(s.P)), Q(static_cast<Index>(s.Q)),
        stride(static_cast<Index>(s.stride)), pad_h(static_cast<Index>(s.pad_h)),
        pad_w(static_cast<Index>(s.pad_w)) {}
};

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE

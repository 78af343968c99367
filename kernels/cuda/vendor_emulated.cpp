// The vendor paths (vendor.h) in an emulated-GPU build: cuBLAS and cuDNN are NVIDIA's binaries
// for real GPUs and are not emulated, so every entry point refuses in one message. They are
// not reached in practice: path.h refuses the vendor setting in this build before any op runs
// (and defaults to the hand-written kernels); this file is the link-time half of that refusal,
// never a fallback to another implementation.
#include <string>

#include "engine/error.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"

namespace brigade::cuda::vendor {

namespace {
[[noreturn]] void refuse(const char* call) {
  throw Error(std::string(call) + ": " + kVendorUnavailable);
}
}  // namespace

void sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
           int64_t, float, float*, int64_t, const Stream&) {
  refuse("cuBLAS sgemm");
}
void dense_forward(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t,
                   const Stream&, bool) {
  refuse("cuBLAS dense_forward");
}
void dense_backward_data(const float*, const float*, float*, int64_t, int64_t, int64_t,
                         const Stream&) {
  refuse("cuBLAS dense_backward_data");
}
void dense_backward_weight(const float*, const float*, float*, int64_t, int64_t, int64_t,
                           const Stream&) {
  refuse("cuBLAS dense_backward_weight");
}
size_t conv2d_workspace_bytes(const Conv2dShape&, const Stream&) {
  refuse("cuDNN conv2d_workspace_bytes");
}
void conv2d_forward(const float*, const float*, const float*, float*, const Conv2dShape&, void*,
                    size_t, const Stream&, bool) {
  refuse("cuDNN conv2d_forward");
}
void conv2d_backward_data(const float*, const float*, float*, const Conv2dShape&, void*, size_t,
                          const Stream&) {
  refuse("cuDNN conv2d_backward_data");
}
void conv2d_backward_filter(const float*, const float*, float*, const Conv2dShape&, void*, size_t,
                            const Stream&) {
  refuse("cuDNN conv2d_backward_filter");
}
void conv2d_backward_bias(const float*, float*, const Conv2dShape&, const Stream&) {
  refuse("cuDNN conv2d_backward_bias");
}
void maxpool2d_forward(const float*, float*, const Pool2dShape&, const Stream&) {
  refuse("cuDNN maxpool2d_forward");
}
void maxpool2d_backward(const float*, const float*, const float*, float*, const Pool2dShape&,
                        const Stream&) {
  refuse("cuDNN maxpool2d_backward");
}

}  // namespace brigade::cuda::vendor

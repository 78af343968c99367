// The CUDA halves of kernels/ops.h (declared in ops_cuda.h), compiled only in CUDA builds.
//
// Each function launches the op's kernel on the stream's cudaStream_t, after declaring the
// stream as a user of the operands it does not own (so the caching allocator does not hand
// their memory to another stream while the kernel may still run).
//
// State of this file: kernels/cuda/ has no launcher yet for the ops below (its hand-written
// kernels and the cuBLAS/cuDNN paths with their selector are being written); until one lands,
// the op throws "<op>: no kernel for cuda:N (...)". That is the rule of ops.h — an op
// without a kernel for the device is an error, never a silent run on the CPU.
#include "kernels/ops_cuda.h"

#include <initializer_list>
#include <string>

namespace brigade::ops::cuda_ops {

namespace {
[[noreturn]] void missing(const char* op, const Stream& stream) {
  throw Error(std::string(op) + ": no kernel for " + stream.device().str() +
              " (kernels/cuda has no launcher for this op yet)");
}
}  // namespace

void conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                    const Conv2dShape&, bool, const Stream& stream) {
  missing("conv2d_forward", stream);
}
void conv2d_backward_data(const Tensor&, const Tensor&, const Tensor&, const Conv2dShape&,
                          const Stream& stream) {
  missing("conv2d_backward_data", stream);
}
void conv2d_backward_params(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Conv2dShape&, const Stream& stream) {
  missing("conv2d_backward_params", stream);
}
void maxpool2d_forward(const Tensor&, const Tensor&, const Tensor&, const Pool2dShape&,
                       const Stream& stream) {
  missing("maxpool2d_forward", stream);
}
void maxpool2d_backward(const Tensor&, const Tensor&, const Tensor&, const Pool2dShape&,
                        const Stream& stream) {
  missing("maxpool2d_backward", stream);
}
void relu_forward(const Tensor&, const Tensor&, const Stream& stream) {
  missing("relu_forward", stream);
}
void relu_backward(const Tensor&, const Tensor&, const Tensor&, const Stream& stream) {
  missing("relu_backward", stream);
}
void dropout(const Tensor&, const Tensor&, float, const DropoutKey&, int64_t,
             const Stream& stream) {
  missing("dropout", stream);
}
void dense_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                   const Stream& stream) {
  missing("dense_forward", stream);
}
void dense_backward_data(const Tensor&, const Tensor&, const Tensor&, const Stream& stream) {
  missing("dense_backward_data", stream);
}
void dense_backward_params(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Stream& stream) {
  missing("dense_backward_params", stream);
}
void softmax_forward(const Tensor&, const Tensor&, const Stream& stream) {
  missing("softmax_forward", stream);
}
void softmax_backward(const Tensor&, const Tensor&, const Tensor&, const Stream& stream) {
  missing("softmax_backward", stream);
}
void softmax_cross_entropy(const Tensor&, const Tensor&, float, const Tensor&, const Tensor&,
                           const Stream& stream) {
  missing("softmax_cross_entropy", stream);
}
void accuracy_count(const Tensor&, const Tensor&, const Tensor&, const Stream& stream) {
  missing("accuracy_count", stream);
}
void sgd_step(const Tensor&, const Tensor&, const Tensor&, const SgdParams&, bool,
              const Stream& stream) {
  missing("sgd_step", stream);
}
void adam_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamParams&,
               int64_t, const Stream& stream) {
  missing("adam_step", stream);
}
void accumulate(const Tensor&, const Tensor&, const Stream& stream) {
  missing("accumulate", stream);
}
void scale(const Tensor&, float, const Stream& stream) { missing("scale", stream); }
void fill(const Tensor&, float, const Stream& stream) { missing("fill", stream); }

}  // namespace brigade::ops::cuda_ops

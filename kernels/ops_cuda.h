// The CUDA halves of kernels/ops.h, one function per op, called by ops.cpp after it has
// checked the operands and allocated the outputs (so these only launch). Defined in
// ops_cuda.cpp, compiled only in CUDA builds. Internal to kernels/: include ops.h instead.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"

namespace brigade::ops::cuda_ops {

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                    const Conv2dShape& s, bool relu, const Stream& stream);
void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                          const Conv2dShape& s, const Stream& stream);
void conv2d_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw,
                            const Tensor& db, const Conv2dShape& s, const Stream& stream);
// Fills r.y, and r.argmax (hand-written path) or r.x (cuDNN path); see ops.h.
void maxpool2d_forward(const Tensor& x, PoolResult& r, const Pool2dShape& s,
                       const Stream& stream);
void maxpool2d_backward(const Tensor& dy, const PoolResult& fwd, const Tensor& dx,
                        const Pool2dShape& s, const Stream& stream);
void relu_forward(const Tensor& x, const Tensor& y, const Stream& stream);
void relu_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, const Stream& stream);
void dropout(const Tensor& x, const Tensor& y, float rate, const DropoutKey& key,
             int64_t sample_offset, const Stream& stream);
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, bool relu,
                   const Stream& stream);
void dense_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                         const Stream& stream);
void dense_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                           const Stream& stream);
void softmax_forward(const Tensor& x, const Tensor& y, const Stream& stream);
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, const Stream& stream);
// Fills r.loss, r.dlogits and r.status (the kernel's CrossEntropyResult).
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float normaliser,
                           LossResult& r, const Stream& stream);
// Checks r.status on the host (blocking) and throws for a bad label.
void check_loss_status(const LossResult& r, int64_t classes);
// Blocking: the count, on the host.
int64_t accuracy_count(const Tensor& logits, const Tensor& labels, const Stream& stream);
void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream);
void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream);
void accumulate(const Tensor& dst, const Tensor& src, const Stream& stream);
void scale(const Tensor& t, float a, const Stream& stream);
void fill(const Tensor& t, float a, const Stream& stream);

}  // namespace brigade::ops::cuda_ops

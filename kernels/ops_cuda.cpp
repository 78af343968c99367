// The CUDA halves of kernels/ops.h (declared in ops_cuda.h), compiled only in CUDA builds.
//
// ops.cpp has checked the operands and allocated the outputs; each function here declares
// the stream as a user of the operands it does not own (so the caching allocator does not
// hand their memory to another stream while a kernel may still read it), then launches:
//   - Conv2D, MaxPooling2D, Dense: the vendor libraries (cuDNN, cuBLAS) or the hand-written
//     kernels, as kernels/cuda/path.h's setting says at this call;
//   - every other op: its hand-written kernel (kernels/cuda/*.h).
// Workspaces are tensors of the stream, so the allocator caches them between calls and
// frees them only after the kernels that use them.
#include "kernels/ops_cuda.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <initializer_list>

#include "kernels/cuda/launchers.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"

namespace brigade::ops::cuda_ops {

namespace {
void use_on(const Stream& stream, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->defined() && !(t->stream() == stream)) t->record_stream(stream);
}

bool vendor() { return cuda_path() == CudaPath::vendor; }

float* f(const Tensor& t) { return t.data<float>(); }
int32_t* i32(const Tensor& t) { return static_cast<int32_t*>(t.storage()->data()); }

// A workspace of at least `bytes` bytes on the stream (never empty: the allocator's
// smallest bin), for the kernels launched right after.
Tensor workspace(uint64_t bytes, const Stream& stream) {
  const int64_t floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  return Tensor::empty(Shape({floats > 0 ? floats : 1}), stream);
}

Tensor conv_workspace(const Conv2dShape& s, const Stream& stream, size_t* bytes) {
  *bytes = vendor() ? cuda::vendor::conv2d_workspace_bytes(s, stream)
                    : static_cast<size_t>(cuda::conv2d_workspace_floats(s)) * sizeof(float);
  return workspace(*bytes, stream);
}
}  // namespace

// ---- Conv2D --------------------------------------------------------------------------------

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                    const Conv2dShape& s, bool relu, const Stream& stream) {
  use_on(stream, {&x, &w, &b, &y});
  size_t bytes = 0;
  const Tensor ws = conv_workspace(s, stream, &bytes);
  if (vendor())
    cuda::vendor::conv2d_forward(f(x), f(w), f(b), f(y), s, f(ws), bytes, stream, relu);
  else
    cuda::conv2d_forward(f(x), f(w), f(b), f(y), s, f(ws), stream, relu);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                          const Conv2dShape& s, const Stream& stream) {
  use_on(stream, {&dy, &w, &dx});
  size_t bytes = 0;
  const Tensor ws = conv_workspace(s, stream, &bytes);
  if (vendor())
    cuda::vendor::conv2d_backward_data(f(dy), f(w), f(dx), s, f(ws), bytes, stream);
  else
    cuda::conv2d_backward_data(f(dy), f(w), f(dx), s, f(ws), stream);
}

void conv2d_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw,
                            const Tensor& db, const Conv2dShape& s, const Stream& stream) {
  use_on(stream, {&x, &dy, &dw, &db});
  size_t bytes = 0;
  const Tensor ws = conv_workspace(s, stream, &bytes);
  if (vendor()) {
    cuda::vendor::conv2d_backward_filter(f(x), f(dy), f(dw), s, f(ws), bytes, stream);
    cuda::vendor::conv2d_backward_bias(f(dy), f(db), s, stream);
  } else {
    cuda::conv2d_backward_filter(f(x), f(dy), f(dw), s, f(ws), stream);
    cuda::conv2d_backward_bias(f(dy), f(db), s, stream);
  }
}

// ---- MaxPooling2D ----------------------------------------------------------------------------

void maxpool2d_forward(const Tensor& x, PoolResult& r, const Pool2dShape& s,
                       const Stream& stream) {
  use_on(stream, {&x, &r.y});
  if (vendor()) {
    r.x = x;  // cuDNN's backward reads x and y instead of an argmax
    cuda::vendor::maxpool2d_forward(f(x), f(r.y), s, stream);
  } else {
    r.argmax = Tensor::empty(r.y.shape(), stream);  // int32 bits
    cuda::maxpool2d_forward(f(x), f(r.y), i32(r.argmax), s, stream);
  }
}

void maxpool2d_backward(const Tensor& dy, const PoolResult& fwd, const Tensor& dx,
                        const Pool2dShape& s, const Stream& stream) {
  use_on(stream, {&dy, &fwd.x, &fwd.y, &fwd.argmax, &dx});
  if (fwd.argmax.defined()) {  // the forward ran the hand-written kernel
    cuda::maxpool2d_backward(f(dy), i32(fwd.argmax), f(dx), s, stream);
  } else {
    BRIGADE_CHECK(fwd.x.defined() && fwd.y.defined(),
                  "maxpool2d_backward: the forward kept neither an argmax nor x and y");
    cuda::vendor::maxpool2d_backward(f(fwd.x), f(fwd.y), f(dy), f(dx), s, stream);
  }
}

// ---- ReLU, Dropout, Dense --------------------------------------------------------------------

void relu_forward(const Tensor& x, const Tensor& y, const Stream& stream) {
  use_on(stream, {&x, &y});
  cuda::relu_forward(f(x), f(y), x.numel(), stream);
}

void relu_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, const Stream& stream) {
  use_on(stream, {&y, &dy, &dx});
  cuda::relu_backward(f(y), f(dy), f(dx), y.numel(), stream);
}

void dropout(const Tensor& x, const Tensor& y, float rate, const DropoutKey& key,
             int64_t sample_offset, const Stream& stream) {
  use_on(stream, {&x, &y});
  const int64_t batch = x.shape()[0];
  cuda::dropout_forward(f(x), f(y), batch, x.numel() / batch, sample_offset, rate, key, stream);
}

void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, bool relu,
                   const Stream& stream) {
  use_on(stream, {&x, &w, &b, &y});
  const int64_t N = x.shape()[0], in = w.shape()[1], out = w.shape()[0];
  if (vendor()) cuda::vendor::dense_forward(f(x), f(w), f(b), f(y), N, in, out, stream, relu);
  else cuda::dense_forward(f(x), f(w), f(b), f(y), N, in, out, stream, relu);
}

void dense_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                         const Stream& stream) {
  use_on(stream, {&dy, &w, &dx});
  const int64_t N = dy.shape()[0], in = w.shape()[1], out = w.shape()[0];
  if (vendor()) cuda::vendor::dense_backward_data(f(dy), f(w), f(dx), N, in, out, stream);
  else cuda::dense_backward_data(f(dy), f(w), f(dx), N, in, out, stream);
}

void dense_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                           const Stream& stream) {
  use_on(stream, {&x, &dy, &dw, &db});
  const int64_t N = x.shape()[0], in = dw.shape()[1], out = dw.shape()[0];
  if (vendor()) cuda::vendor::dense_backward_weight(f(x), f(dy), f(dw), N, in, out, stream);
  else cuda::dense_backward_weight(f(x), f(dy), f(dw), N, in, out, stream);
  cuda::dense_backward_bias(f(dy), f(db), N, out, stream);  // no GEMM in it: one kernel
}

// ---- Softmax, loss, accuracy -----------------------------------------------------------------

void softmax_forward(const Tensor& x, const Tensor& y, const Stream& stream) {
  use_on(stream, {&x, &y});
  cuda::softmax_forward(f(x), f(y), x.shape()[0], x.shape()[1], stream);
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, const Stream& stream) {
  use_on(stream, {&y, &dy, &dx});
  cuda::softmax_backward(f(y), f(dy), f(dx), y.shape()[0], y.shape()[1], stream);
}

void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float normaliser,
                           LossResult& r, const Stream& stream) {
  use_on(stream, {&logits, &labels, &r.loss, &r.dlogits});
  const int64_t N = logits.shape()[0], classes = logits.shape()[1];
  const Tensor ws = Tensor::empty(Shape({cuda::softmax_cross_entropy_workspace_floats(N)}), stream);
  r.status = workspace(sizeof(CrossEntropyResult), stream);
  auto* result = static_cast<CrossEntropyResult*>(r.status.storage()->data());
  cuda::softmax_cross_entropy(f(logits), i32(labels), f(r.dlogits), N, classes, normaliser, f(ws),
                              result, stream);
  // The loss tensor: the first field of the result, copied in stream order.
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(f(r.loss), &result->loss, sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream.cuda_handle()));
}

void check_loss_status(const LossResult& r, int64_t classes) {
  CrossEntropyResult host{};
  const Stream& s = r.status.stream();
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&host, r.status.storage()->data(), sizeof(host),
                                     cudaMemcpyDeviceToHost, s.cuda_handle()));
  s.synchronize();
  try {
    check_cross_entropy_result(host, classes);
  } catch (const std::out_of_range& e) {
    throw Error(e.what());
  }
}

int64_t accuracy_count(const Tensor& logits, const Tensor& labels, const Stream& stream) {
  use_on(stream, {&logits, &labels});
  const Tensor count = workspace(sizeof(unsigned long long), stream);
  auto* device_count = static_cast<unsigned long long*>(count.storage()->data());
  cuda::accuracy_count(f(logits), i32(labels), logits.shape()[0], logits.shape()[1],
                       device_count, stream);
  unsigned long long host = 0;
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&host, device_count, sizeof(host), cudaMemcpyDeviceToHost,
                                     stream.cuda_handle()));
  stream.synchronize();
  return static_cast<int64_t>(host);
}

// ---- Optimizers, elementwise -----------------------------------------------------------------

void sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdParams& h,
              bool first_step, const Stream& stream) {
  use_on(stream, {&p, &g, &buf});
  cuda::sgd_update(f(p), f(g), f(buf), p.numel(), h, first_step, stream);
}

void adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const AdamParams& h, int64_t step, const Stream& stream) {
  use_on(stream, {&p, &g, &m, &v});
  cuda::adam_update(f(p), f(g), f(m), f(v), p.numel(), h, step, stream);
}

void accumulate(const Tensor& dst, const Tensor& src, const Stream& stream) {
  use_on(stream, {&dst, &src});
  cuda::add_to(f(src), f(dst), dst.numel(), stream);
}

void scale(const Tensor& t, float a, const Stream& stream) {
  use_on(stream, {&t});
  cuda::scale(f(t), a, t.numel(), stream);
}

void fill(const Tensor& t, float a, const Stream& stream) {
  use_on(stream, {&t});
  cuda::fill(f(t), a, t.numel(), stream);
}

}  // namespace brigade::ops::cuda_ops

// Conv2D of kernels/ops.h: the checks, then the CPU branch (Winograd or im2col + SGEMM on the
// device's threads, kernels/cpu/conv2d/; in precision bf16 im2col + gemm_bf16, conv2d/bf16.h)
// beside the CUDA branch (cuDNN or the hand-written im2col + gemm_tiled over the micro-batch,
// as kernels/cuda/path.h's setting says at each call). In precision bf16 the hand-written path
// narrows x, w and dy to bfloat16 storage (narrow_to_bf16) for its bf16 passes (im2col in bf16,
// gemm_mma_bf16 on tensor cores); cuDNN runs in float on operands rounded to bf16 values on
// the device (detail::bf16_operand), for the reason below, on TF32 tensor cores (cudnn_math). Each operand may come in either form
// already (conv2d_weights, conv2d_operand: a layer makes its weights, its input and its output
// gradient once for the two passes of a micro-batch that read each); each path takes the
// other's too.
//
// Why cuDNN gets bf16 values in float rather than bfloat16 tensors: its legacy convolution API
// takes bfloat16 only as PSEUDO_BFLOAT16_CONFIG, where x, w AND y are CUDNN_DATA_BFLOAT16 (the
// sums float inside): y would be rounded to bf16 before the bias is added, which is not
// precision bf16's rule (the fp32 sum, then the bias, then one rounding at the layer's
// boundary). In float on bf16 values every product is exact and every sum float: the rule. And
// a bf16 value is exactly a TF32 value (8 significant bits of TF32's 11), so TF32 tensor cores
// compute the same rule: precision bf16 runs cuDNN in tensor-op math whatever --math says.
#include <stdexcept>
#include <string>

#include "kernels/cpu/conv2d/bf16.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"
#endif

namespace brigade::ops {

Conv2dShape conv2d_shape(const char* op, const Shape& x, const Shape& w, const Conv2dArgs& a) {
  BRIGADE_CHECK(x.rank() == 4 && w.rank() == 4 && x[1] == w[1],
                op << ": input " << x << " (N, C, H, W) does not match weights " << w
                   << " (K, C, R, S)");
  try {
    return make_conv2d_shape(x[0], x[1], x[2], x[3], w[0], w[2], w[3], a.stride, a.padding);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

namespace {
// The CPU conv workspace (cpu/conv2d/conv2d.h, or bf16.h in bf16) as a tensor of the stream.
Tensor cpu_workspace(const Conv2dShape& s, const Stream& stream, bool bf16) {
  const int64_t floats = bf16 ? cpu::conv2d_bf16_workspace_floats(s, stream.thread_pool())
                              : cpu::conv2d_workspace_floats(s, stream.thread_pool());
  return detail::workspace(floats * sizeof(float), stream);
}

#if defined(BRIGADE_HAVE_CUDA)
bool vendor() { return cuda_path() == CudaPath::vendor; }

// The math cuDNN computes a convolution in: the process's mode (--math), and in precision bf16
// TF32 on tensor cores whatever the mode: the operands are then bf16 values, each exactly a
// TF32 value, so the tensor cores' products are exact and their sums float — bf16's rule (the
// comment at the top), at tensor-core speed.
MathMode cudnn_math(bool bf16) { return bf16 ? MathMode::tf32 : math_mode(); }

// The CUDA conv workspace of the selected path (for cuDNN, in cudnn_math(bf16)); its size in
// bytes goes to *bytes (cuDNN wants it).
Tensor cuda_workspace(const Conv2dShape& s, const Stream& stream, bool bf16, size_t* bytes) {
  *bytes = vendor() ? cuda::vendor::conv2d_workspace_bytes(s, stream, cudnn_math(bf16))
                    : static_cast<size_t>(cuda::conv2d_workspace_floats(s)) * sizeof(float);
  return detail::workspace(*bytes, stream);
}

// The hand-written launchers count their workspace in floats.
int64_t hand_written_floats(size_t bytes) { return static_cast<int64_t>(bytes / sizeof(float)); }
#endif
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& a,
                      bool relu, const Stream& stream, Bf16Rounding round) {
  detail::check_math_mode("conv2d_forward", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_operands("conv2d_forward", stream, {{"b", &b}});
  detail::check_gemm_operand("conv2d_forward", "x", x, stream);
  detail::check_gemm_operand("conv2d_forward", "w", w, stream);
  const Conv2dShape s = conv2d_shape("conv2d_forward", x.shape(), w.shape(), a);
  detail::check_bias("conv2d_forward", b, s.K);
  Tensor y = Tensor::empty(Shape({s.N, s.K, s.P, s.Q}), stream);  // (N, K, P, Q)
  if (stream.device().is_cpu()) {
    Tensor ws = cpu_workspace(s, stream, bf16);
    detail::on_cpu(stream, {x, w, b, y, ws}, [=](ThreadPool& pool) {
      const auto forward = bf16 ? cpu::conv2d_forward_bf16 : cpu::conv2d_forward;
      forward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), s, pool,
              ws.data<float>(), relu);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &w, &b, &y});
    if (bf16 && !vendor()) {  // tensor cores on the hand-written path
      const Tensor xh = detail::bf16_storage(x, stream);  // (N, C, H, W) bfloat16
      const Tensor wh = detail::bf16_storage(w, stream);  // (K, C, R, S) bfloat16
      size_t bytes = 0;
      const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
      const bool rounds = round == Bf16Rounding::fused;
      cuda::conv2d_forward_bf16(detail::bf16_data(xh), detail::bf16_data(wh), b.data<float>(),
                                y.data<float>(), s, ws.data<float>(), hand_written_floats(bytes),
                                stream, relu, rounds);
      return detail::rounded_if(rounds, y);
    }
    const Tensor xo = detail::bf16_operand(x, bf16, stream);  // x itself in fp32
    const Tensor wo = detail::bf16_operand(w, bf16, stream);
    size_t bytes = 0;
    const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
    if (vendor())
      cuda::vendor::conv2d_forward(xo.data<float>(), wo.data<float>(), b.data<float>(),
                                   y.data<float>(), s, ws.data<float>(), bytes, stream, relu,
                                   cudnn_math(bf16));
    else
      cuda::conv2d_forward(xo.data<float>(), wo.data<float>(), b.data<float>(), y.data<float>(),
                           s, ws.data<float>(), hand_written_floats(bytes), stream, relu);
#else
    (void)round;
    detail::no_kernel("conv2d_forward", stream.device());
#endif
  }
  return y;
}

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                            const Conv2dArgs& a, const Stream& stream, const Tensor& relu_x,
                            Bf16Rounding round) {
  detail::check_math_mode("conv2d_backward_data", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_gemm_operand("conv2d_backward_data", "dy", dy, stream);
  detail::check_gemm_operand("conv2d_backward_data", "w", w, stream);
  const Conv2dShape s = conv2d_shape("conv2d_backward_data", x_shape, w.shape(), a);
  BRIGADE_CHECK(dy.shape() == Shape({s.N, s.K, s.P, s.Q}),
                "conv2d_backward_data: dy " << dy.shape() << " is not the output shape "
                                            << Shape({s.N, s.K, s.P, s.Q}) << " of input "
                                            << x_shape << " and weights " << w.shape());
  if (relu_x.defined()) {
    detail::check_operands("conv2d_backward_data", stream, {{"relu_x", &relu_x}});
    BRIGADE_CHECK(relu_x.shape() == x_shape, "conv2d_backward_data: relu_x "
                                                 << relu_x.shape() << " is not the input shape "
                                                 << x_shape);
  }
  Tensor dx = Tensor::empty(x_shape, stream);  // (N, C, H, W)
  if (stream.device().is_cpu()) {
    Tensor ws = cpu_workspace(s, stream, bf16);
    detail::on_cpu(stream, {dy, w, dx, ws, relu_x}, [=](ThreadPool& pool) {
      const auto backward_data =
          bf16 ? cpu::conv2d_backward_data_bf16 : cpu::conv2d_backward_data;
      backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), s, pool,
                    ws.data<float>(), relu_x.defined() ? relu_x.data<float>() : nullptr);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&dy, &w, &dx});
    if (bf16 && !vendor()) {  // tensor cores on the hand-written path
      const Tensor dyh = detail::bf16_storage(dy, stream);  // (N, K, P, Q) bfloat16
      const Tensor wh = detail::bf16_storage(w, stream);    // (K, C, R, S) bfloat16
      size_t bytes = 0;
      const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
      const bool rounds = round == Bf16Rounding::fused;  // in col2im
      cuda::conv2d_backward_data_bf16(detail::bf16_data(dyh), detail::bf16_data(wh),
                                      dx.data<float>(), s, ws.data<float>(),
                                      hand_written_floats(bytes), stream, rounds);
      // A mask of bf16 values: bf16 values, and the mask's result says so.
      const Tensor d = detail::rounded_if(rounds, dx);
      return relu_x.defined() ? relu_backward(relu_x, d, stream) : d;  // a second kernel
    }
    const Tensor dyo = detail::bf16_operand(dy, bf16, stream);  // dy itself in fp32
    const Tensor wo = detail::bf16_operand(w, bf16, stream);
    size_t bytes = 0;
    const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
    if (vendor())
      cuda::vendor::conv2d_backward_data(dyo.data<float>(), wo.data<float>(), dx.data<float>(), s,
                                         ws.data<float>(), bytes, stream, cudnn_math(bf16));
    else
      cuda::conv2d_backward_data(dyo.data<float>(), wo.data<float>(), dx.data<float>(), s,
                                 ws.data<float>(), hand_written_floats(bytes), stream);
    // A second kernel, hand-written: it rounds as it masks when asked.
    if (relu_x.defined()) return relu_backward(relu_x, dx, stream, round);
#else
    (void)round;
    detail::no_kernel("conv2d_backward_data", stream.device());
#endif
  }
  return dx;
}

namespace {
// conv2d_weights and conv2d_operand: t as the passes read it on the stream's device and path.
Tensor conv2d_gemm_form(const char* op, const char* name, const Tensor& t,
                        const Stream& stream) {
  detail::check_operands(op, stream, {{name, &t}});
  if (precision() == Precision::fp32 || stream.device().is_cpu()) return t;
#if defined(BRIGADE_HAVE_CUDA)
  if (vendor()) return detail::bf16_operand(t, true, stream);  // float32 bf16 values for cuDNN
#endif
  return narrow_to_bf16(t, stream);  // bfloat16 for the tensor cores
}
}  // namespace

Tensor conv2d_weights(const Tensor& w, const Stream& stream) {
  return conv2d_gemm_form("conv2d_weights", "w", w, stream);
}

Tensor conv2d_operand(const Tensor& t, const Stream& stream) {
  return conv2d_gemm_form("conv2d_operand", "t", t, stream);
}

void conv2d_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw,
                            const Tensor& db, const Conv2dArgs& a, const Stream& stream,
                            const Tensor& dy_gemm) {
  detail::check_math_mode("conv2d_backward_params", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_operands("conv2d_backward_params", stream, {{"dy", &dy}, {"dw", &dw},
                                                    {"db", &db}});
  detail::check_gemm_operand("conv2d_backward_params", "x", x, stream);
  detail::check_dy_gemm("conv2d_backward_params", dy_gemm, dy, stream);
  const Conv2dShape s = conv2d_shape("conv2d_backward_params", x.shape(), dw.shape(), a);
  detail::check_bias("conv2d_backward_params", db, s.K);
  BRIGADE_CHECK(dy.shape() == Shape({s.N, s.K, s.P, s.Q}),
                "conv2d_backward_params: dy " << dy.shape() << " is not the output shape "
                                              << Shape({s.N, s.K, s.P, s.Q}) << " of input "
                                              << x.shape() << " and weights " << dw.shape());
  if (stream.device().is_cpu()) {
    Tensor ws = cpu_workspace(s, stream, bf16);
    detail::on_cpu(stream, {x, dy, dw, db, ws}, [=](ThreadPool& pool) {
      const auto backward_filter =
          bf16 ? cpu::conv2d_backward_filter_bf16 : cpu::conv2d_backward_filter;
      backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(), s, pool,
                      ws.data<float>());
      cpu::conv2d_backward_bias(dy.data<float>(), db.data<float>(), s, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &dy, &dw, &db, &dy_gemm});
    const Tensor& dg = dy_gemm.defined() ? dy_gemm : dy;  // what the filter gradient reads
    if (bf16 && !vendor()) {  // tensor cores on the hand-written path
      const Tensor xh = detail::bf16_storage(x, stream);   // (N, C, H, W) bfloat16
      const Tensor dyh = detail::bf16_storage(dg, stream);  // (N, K, P, Q) bfloat16
      size_t bytes = 0;
      const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
      cuda::conv2d_backward_filter_bf16(detail::bf16_data(xh), detail::bf16_data(dyh),
                                        dw.data<float>(), s, ws.data<float>(),
                                        hand_written_floats(bytes), stream);
      // No GEMM in the bias gradient: the float dy, as in fp32.
      cuda::conv2d_backward_bias(dy.data<float>(), db.data<float>(), s, stream);
      return;
    }
    const Tensor xo = detail::bf16_operand(x, bf16, stream);  // x itself in fp32
    const Tensor dyo = detail::bf16_operand(dg, bf16, stream);
    size_t bytes = 0;
    const Tensor ws = cuda_workspace(s, stream, bf16, &bytes);
    if (vendor()) {
      cuda::vendor::conv2d_backward_filter(xo.data<float>(), dyo.data<float>(), dw.data<float>(),
                                           s, ws.data<float>(), bytes, stream, cudnn_math(bf16));
      cuda::vendor::conv2d_backward_bias(dy.data<float>(), db.data<float>(), s, stream);
    } else {
      cuda::conv2d_backward_filter(xo.data<float>(), dyo.data<float>(), dw.data<float>(), s,
                                   ws.data<float>(), hand_written_floats(bytes), stream);
      cuda::conv2d_backward_bias(dy.data<float>(), db.data<float>(), s, stream);
    }
#else
    detail::no_kernel("conv2d_backward_params", stream.device());
#endif
  }
}

}  // namespace brigade::ops

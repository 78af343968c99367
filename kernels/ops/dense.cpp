// Dense of kernels/ops.h: the checks, then the CPU branch (OpenBLAS SGEMM on the device's
// threads, kernels/cpu/dense.h; in precision bf16 gemm_bf16, kernels/cpu/dense_bf16.h) beside
// the CUDA branch (cuBLAS or the hand-written gemm_tiled, as kernels/cuda/path.h's setting
// says at each call). In precision bf16 on a GPU, both paths get the two GEMM operands narrowed
// to bfloat16 storage (narrow_to_bf16): cuBLAS for its bf16 GEMM, the hand-written path for
// gemm_mma_bf16 (kernels/cuda/gemm_mma.cu); both on tensor cores, both bf16's rule. Each operand
// may come narrowed already (dense_weights, dense_operand: a layer narrows its weights, its
// input and its output gradient once for the two passes of a micro-batch that read each).
#include "kernels/cpu/dense.h"
#include "kernels/cpu/dense_bf16.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

#if defined(BRIGADE_HAVE_CUDA)
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/path.h"
#include "kernels/cuda/vendor.h"
#endif

namespace brigade::ops {

namespace {
void check_dense(const char* op, const Shape& x, const Shape& w) {
  BRIGADE_CHECK(x.rank() == 2 && w.rank() == 2 && x[1] == w[1],
                op << ": x " << x << " (N, in) does not match w " << w << " (out, in)");
}

#if defined(BRIGADE_HAVE_CUDA)
bool vendor() { return cuda_path() == CudaPath::vendor; }
#endif
}  // namespace

Tensor dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, bool relu,
                     const Stream& stream, Bf16Rounding round) {
  detail::check_math_mode("dense_forward", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_operands("dense_forward", stream, {{"b", &b}});
  detail::check_gemm_operand("dense_forward", "x", x, stream);
  detail::check_gemm_operand("dense_forward", "w", w, stream);
  check_dense("dense_forward", x.shape(), w.shape());
  detail::check_bias("dense_forward", b, w.shape()[0]);
  const int64_t N = x.shape()[0], in = w.shape()[1], out = w.shape()[0];
  Tensor y = Tensor::empty(Shape({N, out}), stream);  // (N, out)
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, w, b, y}, [=](ThreadPool& pool) {
      if (bf16)
        cpu::dense_forward_bf16(x.data<float>(), w.data<float>(), b.data<float>(),
                                y.data<float>(), N, in, out, pool, relu);
      else
        cpu::dense_forward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(),
                           N, in, out, pool, relu);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &w, &b, &y});
    if (bf16) {
      const Tensor xh = detail::bf16_storage(x, stream);  // (N, in) bfloat16
      const Tensor wh = detail::bf16_storage(w, stream);  // (out, in) bfloat16
      const bool rounds = round == Bf16Rounding::fused;   // both paths' epilogues can
      if (vendor())
        cuda::vendor::dense_forward(detail::bf16_data(xh), detail::bf16_data(wh),
                                    b.data<float>(), y.data<float>(), N, in, out, stream, relu,
                                    rounds);
      else
        cuda::dense_forward_bf16(detail::bf16_data(xh), detail::bf16_data(wh), b.data<float>(),
                                 y.data<float>(), N, in, out, stream, relu, rounds);
      return detail::rounded_if(rounds, y);
    }
    if (vendor())
      cuda::vendor::dense_forward(x.data<float>(), w.data<float>(), b.data<float>(),
                                  y.data<float>(), N, in, out, stream, relu);
    else
      cuda::dense_forward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), N,
                          in, out, stream, relu);
#else
    (void)round;
    detail::no_kernel("dense_forward", stream.device());
#endif
  }
  return y;
}

Tensor dense_backward_data(const Tensor& dy, const Tensor& w, const Stream& stream,
                           Bf16Rounding round) {
  detail::check_math_mode("dense_backward_data", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_gemm_operand("dense_backward_data", "dy", dy, stream);
  detail::check_gemm_operand("dense_backward_data", "w", w, stream);
  BRIGADE_CHECK(dy.shape().rank() == 2 && w.shape().rank() == 2 && dy.shape()[1] == w.shape()[0],
                "dense_backward_data: dy " << dy.shape() << " (N, out) does not match w "
                                           << w.shape() << " (out, in)");
  const int64_t N = dy.shape()[0], in = w.shape()[1], out = w.shape()[0];
  Tensor dx = Tensor::empty(Shape({N, in}), stream);  // (N, in)
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {dy, w, dx}, [=](ThreadPool& pool) {
      if (bf16)
        cpu::dense_backward_data_bf16(dy.data<float>(), w.data<float>(), dx.data<float>(), N,
                                      in, out, pool);
      else
        cpu::dense_backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), N, in,
                                 out, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&dy, &w, &dx});
    if (bf16) {
      const Tensor dyh = detail::bf16_storage(dy, stream);  // (N, out) bfloat16
      const Tensor wh = detail::bf16_storage(w, stream);    // (out, in) bfloat16
      if (vendor()) {  // cuBLAS writes dx: no rounding inside
        cuda::vendor::dense_backward_data(detail::bf16_data(dyh), detail::bf16_data(wh),
                                          dx.data<float>(), N, in, out, stream);
        return dx;
      }
      const bool rounds = round == Bf16Rounding::fused;
      cuda::dense_backward_data_bf16(detail::bf16_data(dyh), detail::bf16_data(wh),
                                     dx.data<float>(), N, in, out, stream, rounds);
      return detail::rounded_if(rounds, dx);
    }
    if (vendor())
      cuda::vendor::dense_backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), N,
                                        in, out, stream);
    else
      cuda::dense_backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), N, in, out,
                                stream);
#else
    (void)round;
    detail::no_kernel("dense_backward_data", stream.device());
#endif
  }
  return dx;
}

namespace {
// dense_weights and dense_operand: t as the GEMMs read it on the stream's device.
Tensor dense_gemm_form(const char* op, const char* name, const Tensor& t,
                       const Stream& stream) {
  detail::check_operands(op, stream, {{name, &t}});
  if (precision() == Precision::fp32 || stream.device().is_cpu()) return t;
  return narrow_to_bf16(t, stream);  // what the passes' bf16 GEMMs read
}
}  // namespace

Tensor dense_weights(const Tensor& w, const Stream& stream) {
  return dense_gemm_form("dense_weights", "w", w, stream);
}

Tensor dense_operand(const Tensor& t, const Stream& stream) {
  return dense_gemm_form("dense_operand", "t", t, stream);
}

void dense_backward_params(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                           const Stream& stream, const Tensor& dy_gemm) {
  detail::check_math_mode("dense_backward_params", stream);
  const bool bf16 = precision() == Precision::bf16;
  detail::check_operands("dense_backward_params", stream, {{"dy", &dy}, {"dw", &dw},
                                                   {"db", &db}});
  detail::check_gemm_operand("dense_backward_params", "x", x, stream);
  detail::check_dy_gemm("dense_backward_params", dy_gemm, dy, stream);
  check_dense("dense_backward_params", x.shape(), dw.shape());
  detail::check_bias("dense_backward_params", db, dw.shape()[0]);
  const int64_t N = x.shape()[0], in = dw.shape()[1], out = dw.shape()[0];
  BRIGADE_CHECK(dy.shape() == Shape({N, out}), "dense_backward_params: dy "
                                                   << dy.shape() << " is not (" << N << ", "
                                                   << out << ") for x " << x.shape());
  if (stream.device().is_cpu()) {
    detail::on_cpu(stream, {x, dy, dw, db}, [=](ThreadPool& pool) {
      if (bf16)
        cpu::dense_backward_weight_bf16(x.data<float>(), dy.data<float>(), dw.data<float>(), N,
                                        in, out, pool);
      else
        cpu::dense_backward_weight(x.data<float>(), dy.data<float>(), dw.data<float>(), N, in,
                                   out, pool);
      cpu::dense_backward_bias(dy.data<float>(), db.data<float>(), N, out, pool);
    });
  } else {
#if defined(BRIGADE_HAVE_CUDA)
    detail::on_cuda(stream, {&x, &dy, &dw, &db, &dy_gemm});
    if (bf16) {
      const Tensor xh = detail::bf16_storage(x, stream);  // (N, in) bfloat16
      const Tensor dyh = detail::bf16_storage(dy_gemm.defined() ? dy_gemm : dy, stream);
      if (vendor())
        cuda::vendor::dense_backward_weight(detail::bf16_data(xh), detail::bf16_data(dyh),
                                            dw.data<float>(), N, in, out, stream);
      else
        cuda::dense_backward_weight_bf16(detail::bf16_data(xh), detail::bf16_data(dyh),
                                         dw.data<float>(), N, in, out, stream);
    } else if (vendor()) {
      cuda::vendor::dense_backward_weight(x.data<float>(), dy.data<float>(), dw.data<float>(), N,
                                          in, out, stream);
    } else {
      cuda::dense_backward_weight(x.data<float>(), dy.data<float>(), dw.data<float>(), N, in,
                                  out, stream);
    }
    // No GEMM in the bias gradient: one hand-written kernel on either path, on the float dy.
    cuda::dense_backward_bias(dy.data<float>(), db.data<float>(), N, out, stream);
#else
    detail::no_kernel("dense_backward_params", stream.device());
#endif
  }
}

}  // namespace brigade::ops

// Precision bf16 (kernels/precision.h) through kernels/ops.h on a GPU (real or emulated; the
// cases say so and return when there is none): on both CUDA paths Dense and Conv2D, each pass,
// against brigade::ref in double on the same operands rounded by ref::round_to_bf16 (within the
// float-sum tolerance of tests/kernels/cpu/check.h, which fp32 operands miss by orders of
// magnitude); on emulated GPUs, that the vendor path's Dense runs cuBLAS's bf16 GEMM
// (cublasGemmEx) and not SGEMM, and that its Conv2D gives the same bits in math mode tf32 (a
// bf16 value is exact in TF32); that the weights and the inputs a layer makes once for two
// passes (ops::dense_weights, dense_operand, conv2d_weights, conv2d_operand) give those passes the
// bits of the plain tensors; and the bf16 value ops bit for bit with the CPU's.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/cuda/path.h"
#include "kernels/math_mode.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "kernels/reference/bf16.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "tests/kernels/cpu/check.h"
#include "tests/kernels/ops/wave.h"
#include "tests/support/error_text.h"
#include "tests/support/precision_for.h"

#if defined(BRIGADE_CUDA_EMULATED)
#include "kernels/emu/cudart/include/cuda_emulation.h"
#endif

namespace brigade::ops {
namespace {

using brigade::testing::wave;
using test::abs_of;
using test::all_close;
using test::sum_tolerance;

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A reference result `ref_of(operands...)` on the bf16-rounded operands, checked against `got`
// with the tolerance of a float sum of L terms (the magnitudes: the reference on |operands|).
template <class Ref>
bool matches_bf16_reference(const char* what, const std::vector<float>& got,
                            const std::vector<float>& a, const std::vector<float>& b, int64_t L,
                            Ref ref_of) {
  std::vector<double> want(got.size(), 0.0), magnitude(got.size(), 0.0);
  const std::vector<double> ra = ref::bf16_operands(a), rb = ref::bf16_operands(b);
  ref_of(ra, rb, want);
  const std::vector<double> ma = abs_of(ra), mb = abs_of(rb);
  ref_of(ma, mb, magnitude);
  return all_close(what, got.data(), want, sum_tolerance(magnitude, L));
}

#if defined(BRIGADE_CUDA_EMULATED)
// How often the emulated runtime and libraries saw the entry point `entry` since `before`
// (emulated GPUs count every call; nothing counts a real GPU's).
uint64_t precision_gpu_calls_since(const emu::gpu::CallCounts& before, const char* entry) {
  const auto d = emu::gpu::call_counts().since(before).by_entry_point;
  const auto it = d.find(entry);
  return it == d.end() ? 0 : it->second;
}

// Math mode tf32 for one scope, fp32 again after it.
struct PrecisionGpuTf32 {
  PrecisionGpuTf32() { set_math_mode(MathMode::tf32); }
  ~PrecisionGpuTf32() { set_math_mode(MathMode::fp32); }
};
#endif

// Dense's passes in bf16 on cuda:0 on `path`, against the reference.
void precision_gpu_dense(CudaPath path) {
  const std::string path_name = cuda_path_name(path);
  CAPTURE(path_name);
  const Stream g = Stream::default_for(Device::cuda(0));
  const int64_t N = 5, in = 37, out = 11;
  const auto xv = wave(N * in, 0.37f), wv = wave(out * in, 0.11f), dyv = wave(N * out, 0.53f);
  const Tensor x = Tensor::from_vector(xv, Shape({N, in}), g);
  const Tensor w = Tensor::from_vector(wv, Shape({out, in}), g);
  const Tensor b = Tensor::zeros(Shape({out}), g);
  const Tensor dy = Tensor::from_vector(dyv, Shape({N, out}), g);
  const Tensor dw = Tensor::zeros(Shape({out, in}), g), db = Tensor::zeros(Shape({out}), g);
  const testing::Bf16OnPath bf16(path);
#if defined(BRIGADE_CUDA_EMULATED)
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
#endif
  const std::vector<float> y = dense_forward(x, w, b, false, g).to_vector();
  const std::vector<float> dx = dense_backward_data(dy, w, g).to_vector();
  dense_backward_params(x, dy, dw, db, g);
#if defined(BRIGADE_CUDA_EMULATED)
  // The vendor path's three GEMMs are cuBLAS's bf16 GEMM: SGEMM on rounded floats would pass
  // the checks below as well, without tensor cores.
  const bool vendor = path == CudaPath::vendor;
  CHECK(precision_gpu_calls_since(before, "cublasGemmEx") == (vendor ? 3u : 0u));
  CHECK(precision_gpu_calls_since(before, "cublasSgemm_v2") == 0u);
#endif
  CHECK(matches_bf16_reference("y", y, xv, wv, in, [&](auto& X, auto& W, auto& Y) {
    ref::dense_forward<double>(X.data(), W.data(), nullptr, Y.data(), N, in, out);
  }));
  CHECK(matches_bf16_reference("dx", dx, dyv, wv, out, [&](auto& DY, auto& W, auto& DX) {
    ref::dense_backward_data<double>(DY.data(), W.data(), DX.data(), N, in, out);
  }));
  CHECK(matches_bf16_reference("dw", dw.to_vector(), xv, dyv, N, [&](auto& X, auto& DY, auto& DW) {
    ref::dense_backward_weight<double>(X.data(), DY.data(), DW.data(), N, in, out);
  }));
  // The bias gradient sums the float dy, unrounded (kernels/cpu/dense_bf16.h's rule).
  std::vector<double> db_want(out, 0.0);
  ref::dense_backward_bias<double>(as_double(dyv).data(), db_want.data(), N, out);
  CHECK(all_close("db", db.to_vector().data(), db_want, 1e-6));
}

}  // namespace

TEST_CASE("precision bf16 on a GPU: Dense's three products on bf16 operands, float sums") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  for (const CudaPath path : {CudaPath::handwritten, CudaPath::vendor}) precision_gpu_dense(path);
}

namespace {

// Conv2D's passes in bf16 on cuda:0 on `path`, against the reference.
void precision_gpu_conv(CudaPath path) {
  const std::string path_name = cuda_path_name(path);
  CAPTURE(path_name);
  const Stream g = Stream::default_for(Device::cuda(0));
  const Conv2dShape s = make_conv2d_shape(2, 4, 6, 6, 5, 3, 3, 1, Padding::same);
  const Shape x_shape({s.N, s.C, s.H, s.W}), w_shape({s.K, s.C, s.R, s.S});
  const auto xv = wave(x_shape.numel(), 0.23f), wv = wave(w_shape.numel(), 0.7f),
             dyv = wave(s.N * s.K * s.P * s.Q, 0.41f);
  const Tensor x = Tensor::from_vector(xv, x_shape, g), w = Tensor::from_vector(wv, w_shape, g);
  const Tensor b = Tensor::zeros(Shape({s.K}), g);
  const Tensor dy = Tensor::from_vector(dyv, Shape({s.N, s.K, s.P, s.Q}), g);
  const Tensor dw = Tensor::zeros(w_shape, g), db = Tensor::zeros(Shape({s.K}), g);
  const testing::Bf16OnPath bf16(path);
  const std::vector<float> y = conv2d_forward(x, w, b, {1, Padding::same}, false, g).to_vector();
  const std::vector<float> dx =
      conv2d_backward_data(dy, w, x_shape, {1, Padding::same}, g).to_vector();
  conv2d_backward_params(x, dy, dw, db, {1, Padding::same}, g);
  const int64_t taps = s.C * s.R * s.S;
  CHECK(matches_bf16_reference("y", y, xv, wv, taps, [&](auto& X, auto& W, auto& Y) {
    ref::conv2d_forward<double>(X.data(), W.data(), nullptr, Y.data(), s);
  }));
  const int64_t fan_out = s.K * s.R * s.S;
  CHECK(matches_bf16_reference("dx", dx, dyv, wv, fan_out, [&](auto& DY, auto& W, auto& DX) {
    ref::conv2d_backward_data<double>(DY.data(), W.data(), DX.data(), s);
  }));
  CHECK(matches_bf16_reference("dw", dw.to_vector(), xv, dyv, s.N * s.P * s.Q,
                               [&](auto& X, auto& DY, auto& DW) {
                                 ref::conv2d_backward_filter<double>(X.data(), DY.data(),
                                                                     DW.data(), s);
                               }));
#if defined(BRIGADE_CUDA_EMULATED)
  // In math mode tf32 cuDNN's tensor-op algorithms read every input rounded to TF32, which
  // leaves a bf16 value as it is: the same bits (the emulated libraries' sums are in one
  // order; a GPU's tensor cores may group them otherwise).
  if (path == CudaPath::vendor) {
    const PrecisionGpuTf32 tf32;
    const Tensor dw32 = Tensor::zeros(w_shape, g), db32 = Tensor::zeros(Shape({s.K}), g);
    const std::vector<float> y32 =
        conv2d_forward(x, w, b, {1, Padding::same}, false, g).to_vector();
    const std::vector<float> dx32 =
        conv2d_backward_data(dy, w, x_shape, {1, Padding::same}, g).to_vector();
    conv2d_backward_params(x, dy, dw32, db32, {1, Padding::same}, g);
    CHECK(test::same_bits(y32, y));
    CHECK(test::same_bits(dx32, dx));
    CHECK(test::same_bits(dw32.to_vector(), dw.to_vector()));
  }
#endif
}

}  // namespace

TEST_CASE("precision bf16 on a GPU: Conv2D's three products on bf16 operands, float sums") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  for (const CudaPath path : {CudaPath::handwritten, CudaPath::vendor}) precision_gpu_conv(path);
}

namespace {

// The operands of precision_gpu_weights and precision_gpu_inputs on `g`: Dense's (N, in) ->
// (N, out) and a valid 3x3 Conv2D's, wave()s.
struct PrecisionGpuOperands {
  explicit PrecisionGpuOperands(const Stream& g) {
    const auto make = [&](const Shape& shape, float f) {
      return Tensor::from_vector(wave(shape.numel(), f), shape, g);
    };
    x = make(Shape({N, in}), 0.29f);
    w = make(Shape({out, in}), 0.13f);
    b = make(Shape({out}), 0.5f);
    dy = make(Shape({N, out}), 0.61f);
    cx = make(cx_shape, 0.31f);
    cw = make(Shape({s.K, s.C, s.R, s.S}), 0.17f);
    cb = make(Shape({s.K}), 0.43f);
    cdy = make(Shape({s.N, s.K, s.P, s.Q}), 0.37f);
  }
  static constexpr int64_t N = 3, in = 19, out = 7;
  const Conv2dShape s = make_conv2d_shape(2, 3, 5, 5, 4, 3, 3, 1, Padding::valid);
  const Shape cx_shape = Shape({s.N, s.C, s.H, s.W});
  Tensor x, w, b, dy;      // Dense: (N, in), (out, in), (out), (N, out)
  Tensor cx, cw, cb, cdy;  // Conv2D: (N, C, H, W), (K, C, R, S), (K), (N, K, P, Q)
};

// The weights a layer makes once for a micro-batch's forward and backward-data
// (ops::dense_weights, conv2d_weights) give both passes the bits of the weights themselves, on
// `path`; and the other path's form too. Emulated GPUs: one launch fewer for the pair.
void precision_gpu_weights(CudaPath path) {
  const std::string path_name = cuda_path_name(path);
  CAPTURE(path_name);
  const CudaPath other = path == CudaPath::vendor ? CudaPath::handwritten : CudaPath::vendor;
  const Stream g = Stream::default_for(Device::cuda(0));
  const PrecisionGpuOperands o(g);
  const Tensor &x = o.x, &w = o.w, &b = o.b, &dy = o.dy, &cx = o.cx, &cw = o.cw, &cb = o.cb,
               &cdy = o.cdy;
  const Shape& cx_shape = o.cx_shape;
  const Conv2dArgs a{};
  const testing::Bf16OnPath bf16(path);
  // Dense's and Conv2D's forward and backward-data on the weights given.
  const auto passes = [&](const Tensor& dense_w, const Tensor& conv_w) {
    return std::vector<std::vector<float>>{
        dense_forward(x, dense_w, b, true, g).to_vector(),
        dense_backward_data(dy, dense_w, g).to_vector(),
        conv2d_forward(cx, conv_w, cb, a, true, g).to_vector(),
        conv2d_backward_data(cdy, conv_w, cx_shape, a, g).to_vector()};
  };
#if defined(BRIGADE_CUDA_EMULATED)
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
#endif
  const std::vector<std::vector<float>> want = passes(w, cw);
#if defined(BRIGADE_CUDA_EMULATED)
  const uint64_t launches_each = precision_gpu_calls_since(before, "cudaLaunchKernel");
  const emu::gpu::CallCounts between = emu::gpu::call_counts();
#endif
  const Tensor dense_w = dense_weights(w, g), conv_w = conv2d_weights(cw, g);
  const std::vector<std::vector<float>> got = passes(dense_w, conv_w);
#if defined(BRIGADE_CUDA_EMULATED)
  // Each op's two passes narrowed (or rounded) its weights once each; now once for both.
  CHECK(precision_gpu_calls_since(between, "cudaLaunchKernel") + 2 == launches_each);
#endif
  CHECK(dense_w.dtype() == DType::bfloat16);
  CHECK(conv_w.dtype() == (path == CudaPath::vendor ? DType::float32 : DType::bfloat16));
  CHECK(conv_w.holds_bf16_values() == (path == CudaPath::vendor));
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(test::same_bits(got[i], want[i]));
  }
  // The other path's form of the weights: the same bits as its own.
  set_cuda_path(other);
  const std::vector<std::vector<float>> other_want = passes(w, cw);
  const std::vector<std::vector<float>> other_got = passes(dense_w, conv_w);
  for (size_t i = 0; i < other_want.size(); ++i) {
    CAPTURE(i);
    CHECK(test::same_bits(other_got[i], other_want[i]));
  }
  set_cuda_path(path);
  // A bfloat16 w outside precision bf16 is refused, never read as floats.
  set_precision(Precision::fp32);
  CHECK(dense_weights(w, g).storage() == w.storage());
  CHECK(conv2d_weights(cw, g).storage() == cw.storage());
  CHECK(testing::error_text<Error>([&] { dense_forward(x, dense_w, b, false, g); })
            .find("in bfloat16 storage is for precision bf16 on a GPU") != std::string::npos);
  set_precision(Precision::bf16);
}

}  // namespace

TEST_CASE("precision bf16 on a GPU: weights narrowed once for forward and backward-data give "
          "the same bits") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  for (const CudaPath path : {CudaPath::handwritten, CudaPath::vendor})
    precision_gpu_weights(path);
}

namespace {

// The input and the output gradient a layer makes once for the two passes that read each
// (ops::dense_operand, conv2d_operand: x for the forward and the weight gradient, dy for the
// backward-data and the weight gradient) give those passes the bits of the plain tensors, on
// `path`. Emulated GPUs: one launch fewer for each pair (x and dy are no bf16 values here, so
// the vendor path's Conv2D rounds each once rather than twice).
void precision_gpu_inputs(CudaPath path) {
  const std::string path_name = cuda_path_name(path);
  CAPTURE(path_name);
  const Stream g = Stream::default_for(Device::cuda(0));
  const PrecisionGpuOperands o(g);
  const Tensor &x = o.x, &w = o.w, &b = o.b, &dy = o.dy, &cx = o.cx, &cw = o.cw, &cb = o.cb,
               &cdy = o.cdy;
  const Conv2dArgs a{};
  const testing::Bf16OnPath bf16(path);
  // Dense's and Conv2D's four passes on the inputs given, and (when defined) the output
  // gradients' GEMM forms.
  const auto passes = [&](const Tensor& dense_x, const Tensor& conv_x, const Tensor& dense_dy,
                          const Tensor& conv_dy) {
    const Tensor dw = Tensor::zeros(w.shape(), g), db = Tensor::zeros(b.shape(), g);
    const Tensor cdw = Tensor::zeros(cw.shape(), g), cdb = Tensor::zeros(cb.shape(), g);
    std::vector<std::vector<float>> r{
        dense_forward(dense_x, w, b, true, g).to_vector(),
        dense_backward_data(dense_dy.defined() ? dense_dy : dy, w, g).to_vector(),
        conv2d_forward(conv_x, cw, cb, a, true, g).to_vector(),
        conv2d_backward_data(conv_dy.defined() ? conv_dy : cdy, cw, o.cx_shape, a, g)
            .to_vector()};
    dense_backward_params(dense_x, dy, dw, db, g, dense_dy);
    conv2d_backward_params(conv_x, cdy, cdw, cdb, a, g, conv_dy);
    for (const Tensor& t : {dw, db, cdw, cdb}) r.push_back(t.to_vector());
    return r;
  };
#if defined(BRIGADE_CUDA_EMULATED)
  const emu::gpu::CallCounts before = emu::gpu::call_counts();
#endif
  const std::vector<std::vector<float>> want = passes(x, cx, Tensor(), Tensor());
#if defined(BRIGADE_CUDA_EMULATED)
  const uint64_t launches_each = precision_gpu_calls_since(before, "cudaLaunchKernel");
  const emu::gpu::CallCounts between = emu::gpu::call_counts();
#endif
  const Tensor dense_x = dense_operand(x, g), conv_x = conv2d_operand(cx, g);
  const std::vector<std::vector<float>> got =
      passes(dense_x, conv_x, dense_operand(dy, g), conv2d_operand(cdy, g));
#if defined(BRIGADE_CUDA_EMULATED)
  CHECK(precision_gpu_calls_since(between, "cudaLaunchKernel") + 4 == launches_each);
#endif
  CHECK(dense_x.dtype() == DType::bfloat16);
  CHECK(conv_x.dtype() == (path == CudaPath::vendor ? DType::float32 : DType::bfloat16));
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(test::same_bits(got[i], want[i]));
  }
  // x holding bf16 values already is the vendor path's Conv2D input as it is.
  if (path == CudaPath::vendor) CHECK(conv2d_operand(conv_x, g).storage() == conv_x.storage());
  // A bfloat16 x outside precision bf16 is refused, never read as floats.
  set_precision(Precision::fp32);
  CHECK(dense_operand(x, g).storage() == x.storage());
  CHECK(testing::error_text<Error>([&] { dense_forward(dense_x, w, b, false, g); })
            .find("dense_forward: x") != std::string::npos);
  set_precision(Precision::bf16);
}

}  // namespace

TEST_CASE("precision bf16 on a GPU: an input and an output gradient narrowed once for the two "
          "passes that read each give the same bits") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  for (const CudaPath path : {CudaPath::handwritten, CudaPath::vendor})
    precision_gpu_inputs(path);
}

TEST_CASE("precision bf16 on a GPU: the value ops give the CPU's bits") {
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): nothing to run");
    return;
  }
  const Stream g = Stream::default_for(Device::cuda(0)), c = Stream::default_for(Device::cpu(0));
  std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 0x1p-133f, INFINITY};
  for (float v : wave(5000, 0.37f)) values.push_back(v * 1e-38f);  // denormals and normals
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor xg = Tensor::from_vector(values, Shape({n}), g);
  const Tensor xc = Tensor::from_vector(values, Shape({n}), c);
  const Tensor rounded = Tensor::empty(Shape({n}), g);
  round_to_bf16(xg, rounded, g);
  const Tensor narrow = narrow_to_bf16(xg, g);
  CHECK(narrow.dtype() == DType::bfloat16);
  const Tensor cpu_rounded = Tensor::empty(Shape({n}), c);
  round_to_bf16(xc, cpu_rounded, c);
  const std::vector<float> want = cpu_rounded.to_vector();
  CHECK(test::same_bits(rounded.to_vector(), want));
  CHECK(test::same_bits(widen_to_float32(narrow, g).to_vector(), want));
}

}  // namespace brigade::ops

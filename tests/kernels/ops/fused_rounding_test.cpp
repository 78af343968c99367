// ops::Bf16Rounding (kernels/ops.h): an op asked to round its result in the kernel that writes
// it gives, bit for bit, ops::round_to_bf16 of the result it gives unasked, and says so
// (Tensor::holds_bf16_values) exactly where the op promises: each hand-written CUDA kernel
// that writes a layer's output or input gradient, on both CUDA paths (real or emulated GPUs;
// the case says so and returns when there is none). Where a library writes the result (cuDNN,
// cuBLAS), and on CPU devices, the result comes back as unasked: the same bits, unmarked, for
// the layer boundary to round (layers/bf16_boundary.h). The operands are wave()s, not bf16
// values, and each rounded result is checked to differ from the plain one somewhere, so that
// a kernel ignoring the request fails.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/cuda/path.h"
#include "kernels/ops.h"
#include "kernels/precision.h"
#include "tests/kernels/ops/wave.h"
#include "tests/support/precision_for.h"

namespace brigade::ops {
namespace {

using brigade::testing::wave;

// The bits of a float32 tensor's elements.
std::vector<uint32_t> fused_rounding_bits(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// `fused`: the op asked for Bf16Rounding::fused; `plain`: the same op unasked, on the same
// operands. `rounds`: whether the op promises to round here.
void check_fused_rounding(const char* what, const Tensor& plain, const Tensor& fused,
                          bool rounds, const Stream& s) {
  CAPTURE(what);
  CHECK(fused.holds_bf16_values() == rounds);
  CHECK_FALSE(plain.holds_bf16_values());  // wave() operands: nothing marks the plain result
  const Tensor rounded = round_to_bf16(plain, Tensor::empty(plain.shape(), s), s);
  const std::vector<uint32_t> want = fused_rounding_bits(rounds ? rounded : plain);
  CHECK(fused_rounding_bits(fused) == want);
  if (rounds) CHECK(fused_rounding_bits(plain) != want);  // the rounding changed something
}

// Every op of ops.h that takes a Bf16Rounding, on `device` (`path` on a GPU).
void check_fused_rounding_ops(const Device& device, CudaPath path) {
  const std::string where = device.str() + " " + cuda_path_name(path);
  CAPTURE(where);
  const Stream s = Stream::default_for(device);
  const testing::Bf16OnPath bf16(path);
  const bool gpu = device.is_cuda(), hand_written = gpu && path == CudaPath::handwritten;
  const Bf16Rounding none = Bf16Rounding::none, fused = Bf16Rounding::fused;
  const auto tensor = [&](const Shape& shape, float f) {
    return Tensor::from_vector(wave(shape.numel(), f), shape, s);
  };

  // Dropout, both ways: the one kernel, on either path.
  const Tensor d = tensor(Shape({3, 40}), 0.31f);
  const DropoutKey key{17, 2, 5};
  check_fused_rounding("dropout_forward", dropout_forward(d, 0.3f, key, 4, s),
                       dropout_forward(d, 0.3f, key, 4, s, Tensor(), fused), gpu, s);
  check_fused_rounding("dropout_backward", dropout_backward(d, 0.3f, key, 4, s),
                       dropout_backward(d, 0.3f, key, 4, s, Tensor(), fused), gpu, s);

  // Dense: the forward's epilogue on either path (add_bias_rows after cuBLAS); the
  // backward-data's on the hand-written path only (cuBLAS writes dx).
  const int64_t N = 5, in = 37, out = 11;
  const Tensor x = tensor(Shape({N, in}), 0.37f), w = tensor(Shape({out, in}), 0.11f);
  const Tensor b = tensor(Shape({out}), 0.7f), dy = tensor(Shape({N, out}), 0.53f);
  check_fused_rounding("dense_forward", dense_forward(x, w, b, true, s),
                       dense_forward(x, w, b, true, s, fused), gpu, s);
  check_fused_rounding("dense_backward_data", dense_backward_data(dy, w, s, none),
                       dense_backward_data(dy, w, s, fused), hand_written, s);

  // Conv2D: the forward's epilogue and col2im on the hand-written path (cuDNN writes y and dx);
  // a ReLU's mask written into dx, after either, on both paths.
  const Conv2dArgs a{1, Padding::same};
  const Tensor cx = relu_forward(tensor(Shape({2, 4, 6, 6}), 0.23f), s);  // a ReLU's output
  const Tensor cw = tensor(Shape({5, 4, 3, 3}), 0.19f), cb = tensor(Shape({5}), 0.9f);
  const Tensor cdy = tensor(Shape({2, 5, 6, 6}), 0.43f);
  check_fused_rounding("conv2d_forward", conv2d_forward(cx, cw, cb, a, true, s),
                       conv2d_forward(cx, cw, cb, a, true, s, fused), hand_written, s);
  check_fused_rounding("conv2d_backward_data",
                       conv2d_backward_data(cdy, cw, cx.shape(), a, s),
                       conv2d_backward_data(cdy, cw, cx.shape(), a, s, Tensor(), fused),
                       hand_written, s);
  check_fused_rounding("conv2d_backward_data, masked",
                       conv2d_backward_data(cdy, cw, cx.shape(), a, s, cx),
                       conv2d_backward_data(cdy, cw, cx.shape(), a, s, cx, fused), gpu, s);

  // MaxPool2D's backward, masked by a ReLU's output, overlapping 3x3 windows of stride 2 (an
  // input element won by two windows gets a sum): its hand-written kernel rounds.
  const Pool2dArgs pa{3, 3, 2};
  const PoolResult pool = maxpool2d_forward(cx, pa, s);
  const Tensor pdy = tensor(pool.y.shape(), 0.61f);
  check_fused_rounding("maxpool2d_backward", maxpool2d_backward(pdy, pool, pa, s, pool.y),
                       maxpool2d_backward(pdy, pool, pa, s, pool.y, fused), hand_written, s);

  // ReLU's backward on its own.
  const Tensor rdy = tensor(cx.shape(), 0.29f);
  check_fused_rounding("relu_backward", relu_backward(cx, rdy, s),
                       relu_backward(cx, rdy, s, fused), gpu, s);
}

}  // namespace

TEST_CASE("Bf16Rounding::fused: round_to_bf16's bits, marked, where a hand-written GPU kernel "
          "writes the result; as unasked elsewhere") {
  check_fused_rounding_ops(Device::cpu(0), cuda_path());
  if (cuda_device_count() == 0) {
    MESSAGE("no CUDA device (real or emulated): the CPU's results only");
    return;
  }
  for (const CudaPath path : {CudaPath::handwritten, CudaPath::vendor})
    check_fused_rounding_ops(Device::cuda(0), path);
}

}  // namespace brigade::ops

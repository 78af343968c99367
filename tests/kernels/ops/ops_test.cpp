// kernels/ops.h on CPU devices: each op against kernels/reference in double, the checks that
// name the op and the shapes, dropout independent of the micro-batch cut, and operands owned
// by another stream.
#include "kernels/ops.h"

#include <doctest/doctest.h>

#include <cmath>
#include <exception>
#include <string>

#include "engine/event.h"
#include "kernels/math_mode.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "kernels/reference/maxpool2d.h"
#include "tests/kernels/ops/wave.h"
#include "tests/support/deadline.h"
#include "tests/support/error_text.h"

namespace brigade::ops {
namespace {

using brigade::testing::wave;

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// |got - want| <= length · 2⁻²³ · (|want| + 1): float rounding of a sum of `length` terms of
// size about one.
void check_close(const std::vector<float>& got, const std::vector<double>& want, int64_t length) {
  REQUIRE(got.size() == want.size());
  const double tol = double(length) * std::ldexp(1.0, -23);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * (std::abs(want[i]) + 1));
  }
}

template <class Fn>
std::string message_of(Fn fn) {
  return brigade::testing::error_text<std::exception>(fn);
}

TEST_CASE("conv2d, maxpool2d and dense ops match the reference on a two-thread device") {
  testing::Deadline deadline("ops vs reference");
  configure_cpu_device(5, {2, 0});
  const Stream s = Stream::create(Device::cpu(5));
  const Conv2dArgs a{2, Padding::same};
  const Shape xs({3, 2, 7, 5}), ws({4, 2, 3, 3});
  const Tensor x = Tensor::from_vector(wave(xs.numel(), 0.3f), xs, s);
  const Tensor w = Tensor::from_vector(wave(ws.numel(), 0.7f), ws, s);
  const Tensor b = Tensor::from_vector(wave(4, 1.1f), Shape({4}), s);
  const Conv2dShape cs = conv2d_shape("test", xs, ws, a);
  const int64_t length = cs.C * cs.R * cs.S;

  const Tensor y = conv2d_forward(x, w, b, a, /*relu=*/false, s);
  std::vector<double> xd = to_double(x.to_vector()), wd = to_double(w.to_vector()),
                      bd = to_double(b.to_vector()), yd(size_t(cs.y_size()));
  ref::conv2d_forward(xd.data(), wd.data(), bd.data(), yd.data(), cs);
  check_close(y.to_vector(), yd, length);

  const Tensor dy = Tensor::from_vector(wave(cs.y_size(), 0.45f), y.shape(), s);
  std::vector<double> dyd = to_double(dy.to_vector()), dxd(size_t(cs.x_size()));
  ref::conv2d_backward_data(dyd.data(), wd.data(), dxd.data(), cs);
  check_close(conv2d_backward_data(dy, w, xs, a, s).to_vector(), dxd, cs.K * cs.R * cs.S);

  const Tensor dw = Tensor::zeros(ws, s), db = Tensor::zeros(Shape({4}), s);
  conv2d_backward_params(x, dy, dw, db, a, s);
  conv2d_backward_params(x, dy, dw, db, a, s);  // accumulates: twice the gradient
  std::vector<double> dwd(size_t(cs.w_size())), dbd(4);
  ref::conv2d_backward_filter(xd.data(), dyd.data(), dwd.data(), cs);
  ref::conv2d_backward_filter(xd.data(), dyd.data(), dwd.data(), cs);
  ref::conv2d_backward_bias(dyd.data(), dbd.data(), cs);
  ref::conv2d_backward_bias(dyd.data(), dbd.data(), cs);
  check_close(dw.to_vector(), dwd, 2 * cs.N * cs.P * cs.Q);
  check_close(db.to_vector(), dbd, 2 * cs.N * cs.P * cs.Q);

  // Max pooling: exact (a comparison and a copy); the gradient lands on the argmax.
  const Pool2dArgs pa{2, 2, 2};
  const PoolResult pr = maxpool2d_forward(y, pa, s);
  const Pool2dShape ps = make_pool2d_shape(3, 4, cs.P, cs.Q, 2, 2, 2, Padding::valid);
  std::vector<float> yv = y.to_vector(), py(size_t(ps.y_size()));
  std::vector<int32_t> argmax(py.size());
  ref::maxpool2d_forward(yv.data(), py.data(), argmax.data(), ps);
  CHECK(pr.y.to_vector() == py);
  const Tensor pdy = Tensor::from_vector(wave(ps.y_size(), 0.2f), pr.y.shape(), s);
  std::vector<float> pdyv = pdy.to_vector(), pdx(size_t(ps.x_size()));
  ref::maxpool2d_backward(pdyv.data(), argmax.data(), pdx.data(), ps);
  CHECK(maxpool2d_backward(pdy, pr, pa, s).to_vector() == pdx);

  // Dense on the flattened pooled output.
  const Tensor flat = pr.y.reshape(Shape({3, ps.C * ps.P * ps.Q}));
  const int64_t in = flat.shape()[1];
  const Tensor dw2 = Tensor::from_vector(wave(6 * in, 0.9f), Shape({6, in}), s);
  const Tensor db2 = Tensor::from_vector(wave(6, 0.4f), Shape({6}), s);
  std::vector<double> fd = to_double(flat.to_vector()), w2d = to_double(dw2.to_vector()),
                      b2d = to_double(db2.to_vector()), outd(18);
  ref::dense_forward(fd.data(), w2d.data(), b2d.data(), outd.data(), 3, in, 6);
  for (double& v : outd) v = v > 0 ? v : 0;  // the fused ReLU
  check_close(dense_forward(flat, dw2, db2, /*relu=*/true, s).to_vector(), outd, in);
  s.synchronize();
}

TEST_CASE("dropout masks do not depend on how the batch is cut") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const DropoutKey key{77, 5, 3};
  const Tensor x = Tensor::from_vector(wave(6 * 10, 0.5f), Shape({6, 10}), s);
  const std::vector<float> whole = dropout_forward(x, 0.5f, key, 0, s).to_vector();
  const std::vector<float> xv = x.to_vector();
  std::vector<float> parts;
  for (int64_t begin : {0, 1, 4}) {  // micro-batches of 1, 3 and 2 samples
    const int64_t n = begin == 0 ? 1 : begin == 1 ? 3 : 2;
    const std::vector<float> part(xv.begin() + begin * 10, xv.begin() + (begin + n) * 10);
    const Tensor xp = Tensor::from_vector(part, Shape({n, 10}), s);
    for (float v : dropout_forward(xp, 0.5f, key, begin, s).to_vector()) parts.push_back(v);
  }
  CHECK(parts == whole);
  int zeros = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    zeros += whole[i] == 0.0f;
    if (whole[i] != 0.0f) CHECK(whole[i] == xv[i] * 2.0f);  // kept, scaled by 1 / (1 - 0.5)
  }
  CHECK(zeros > 10);  // of 60 at rate 0.5: a mask that drops nothing would fail here
  CHECK(zeros < 50);
}

TEST_CASE("ops name themselves and the shapes or devices that are wrong") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const Tensor x = Tensor::zeros(Shape({2, 8}), s);
  const Tensor w = Tensor::zeros(Shape({3, 7}), s);
  const Tensor b = Tensor::zeros(Shape({3}), s);
  const std::string dense = message_of([&] { dense_forward(x, w, b, false, s); });
  CHECK(dense.find("dense_forward") != std::string::npos);
  CHECK(dense.find("(2, 8)") != std::string::npos);
  CHECK(dense.find("(3, 7)") != std::string::npos);

  const Tensor img = Tensor::zeros(Shape({1, 1, 2, 2}), s);
  const Tensor k = Tensor::zeros(Shape({1, 1, 3, 3}), s);
  const std::string conv =
      message_of([&] { conv2d_forward(img, k, Tensor::zeros(Shape({1}), s), {}, false, s); });
  CHECK(conv.find("conv2d_forward") != std::string::npos);
  CHECK(conv.find("3x3") != std::string::npos);

  const Tensor elsewhere = Tensor::zeros(Shape({2, 8}), Stream::default_for(Device::cpu(1)));
  const std::string device = message_of([&] { relu_forward(elsewhere, s); });
  CHECK(device.find("relu_forward") != std::string::npos);
  CHECK(device.find("cpu:1") != std::string::npos);
  CHECK(device.find("cpu:0") != std::string::npos);

  // A stream of its own: a failed task makes its stream fail for good (sticky errors).
  const Stream doomed = Stream::create(Device::cpu(0));
  const Tensor logits = Tensor::zeros(Shape({2, 3}), doomed);
  const LossResult bad = softmax_cross_entropy(logits, labels_tensor({0, 3}, doomed), 2, doomed);
  CHECK(message_of([&] { loss_value(bad); }).find("label 3 of row 1") != std::string::npos);
}

// Math mode tf32 (kernels/math_mode.h) is the vendor libraries' on GPUs: a CPU device's Dense
// and Conv2D refuse it, naming the op and the device, instead of computing fp32.
TEST_CASE("Dense and Conv2D on a CPU device refuse math mode tf32") {
  const Stream s = Stream::default_for(Device::cpu(0));
  const Tensor x = Tensor::zeros(Shape({2, 8}), s), w = Tensor::zeros(Shape({3, 8}), s),
               b = Tensor::zeros(Shape({3}), s);
  const Tensor img = Tensor::zeros(Shape({1, 1, 3, 3}), s), k = Tensor::zeros(Shape({1, 1, 3, 3}), s),
               kb = Tensor::zeros(Shape({1}), s);
  set_math_mode(MathMode::tf32);
  const std::string dense = message_of([&] { dense_forward(x, w, b, false, s); });
  const std::string conv = message_of([&] { conv2d_forward(img, k, kb, {}, false, s); });
  set_math_mode(MathMode::fp32);
  CHECK(dense == "dense_forward: math mode tf32 needs tensor cores: cpu:0 is a CPU device, "
                 "which computes in fp32 only (use --math fp32, the default)");
  CHECK(conv.find("conv2d_forward: math mode tf32 needs tensor cores: cpu:0") != std::string::npos);
  CHECK(dense_forward(x, w, b, false, s).to_vector() == std::vector<float>(6, 0.0f));  // fp32 runs
}

TEST_CASE("an op on another stream of the device orders after the producer and keeps its operands") {
  testing::Deadline deadline("second stream");
  const Stream owner = Stream::default_for(Device::cpu(0));
  const Stream other = Stream::create(Device::cpu(0));
  Tensor x = Tensor::from_vector({-1, 2, -3, 4}, Shape({4}), owner);
  Event ready;
  ready.record(owner);
  other.wait(ready);
  Tensor y = relu_forward(x, other);
  x = Tensor();  // the op holds its input until it has run
  accumulate(y, y, other);
  scale(y, 0.5f, other);
  other.synchronize();
  CHECK(y.to_vector() == std::vector<float>{0, 2, 0, 4});
  fill(y, 3.0f, other);
  other.synchronize();
  CHECK(y.to_vector() == std::vector<float>{3, 3, 3, 3});
}

}  // namespace
}  // namespace brigade::ops

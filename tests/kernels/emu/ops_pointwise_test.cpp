// The elementwise and row-wise kernels of kernels/cuda/ through the emulator, against
// brigade::ref: ReLU, dropout, the elementwise helpers, SGD and Adam/AdamW, softmax, the fused
// softmax + cross-entropy and the accuracy count. Sizes 1, odd, and not multiples of the
// 256-thread block or the 32-lane warp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/launchers.h"
#include "kernels/reference/dropout.h"
#include "kernels/reference/elementwise.h"
#include "kernels/reference/optimizers.h"
#include "kernels/reference/relu.h"
#include "kernels/reference/softmax.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

namespace {
const int64_t kSizes[] = {1, 3, 7, 33, 257, 1031};
}  // namespace

TEST_CASE("relu forward and backward are bit-identical to the reference, zeros included") {
  testing::Deadline deadline("emulated relu");
  const Stream stream = emu_stream();
  for (int64_t n : kSizes) {
    INFO("n = " << n);
    std::vector<float> x = to_float(random_vector(n, 40)), dy = to_float(random_vector(n, 41));
    x[0] = 0.0f;  // the kink: the gradient at 0 is 0
    std::vector<float> y_ref(n), dx_ref(n), y = nan_vector(n), dx = nan_vector(n);
    ref::relu_forward(x.data(), y_ref.data(), n);
    ref::relu_backward(y_ref.data(), dy.data(), dx_ref.data(), n);
    emu::relu_forward(x.data(), y.data(), n, stream);
    emu::relu_backward(y.data(), dy.data(), dx.data(), n, stream);
    emu::relu_forward(x.data(), x.data(), n, stream);  // in place
    stream.synchronize();
    CHECK(all_equal("y", y.data(), y_ref.data(), n));
    CHECK(all_equal("dx", dx.data(), dx_ref.data(), n));
    CHECK(all_equal("y in place", x.data(), y_ref.data(), n));
  }
}

// A NaN must reach the stage's finite check: ReLU lets it through (as the CPU path and PyTorch
// do), alone and fused into Dense and Conv2D. y[i] is NaN exactly where x[i] is.
TEST_CASE("relu lets NaN through: alone, fused into dense, fused into conv2d") {
  testing::Deadline deadline("emulated relu of NaN");
  const Stream stream = emu_stream();
  const float x[] = {NAN, -1.0f, 2.0f, -NAN, 0.0f};
  float y[5];
  emu::relu_forward(x, y, 5, stream);
  // Dense, 1 sample, 1 input, 3 outputs: w = 1, bias {NaN, -5, 5}, x = 1.
  const float one = 1.0f, w[] = {1.0f, 1.0f, 1.0f}, b[] = {NAN, -5.0f, 5.0f};
  float dense_y[3];
  emu::dense_forward(&one, w, b, dense_y, 1, 1, 3, stream, /*relu=*/true);
  // Conv2D, 1x1 kernel over a 1x2 image, 3 filters of weight 1, bias {NaN, -5, 5}.
  const Conv2dShape s = make_conv2d_shape(1, 1, 1, 2, 3, 1, 1, 1, Padding::valid);
  const float image[] = {1.0f, 1.0f};
  std::vector<float> workspace(static_cast<size_t>(emu::conv2d_workspace_floats(s)) + 1);
  float conv_y[6];
  emu::conv2d_forward(image, w, b, conv_y, s, workspace.data(),
                      static_cast<int64_t>(workspace.size()), stream, /*relu=*/true);
  stream.synchronize();
  for (int i = 0; i < 5; ++i) CHECK(std::isnan(y[i]) == std::isnan(x[i]));
  CHECK(std::isnan(dense_y[0]));
  CHECK(dense_y[1] == 0.0f);
  CHECK(dense_y[2] == 6.0f);
  CHECK((std::isnan(conv_y[0]) && std::isnan(conv_y[1])));
  CHECK((conv_y[2] == 0.0f && conv_y[5] == 6.0f));
}

TEST_CASE("dropout: the reference's Philox mask bit for bit, whatever the micro-batch split") {
  testing::Deadline deadline("emulated dropout");
  const Stream stream = emu_stream();
  const DropoutKey key{0x123456789abcdefull, 17, 2};
  for (float rate : {0.0f, 0.25f, 0.5f}) {
    for (int64_t per_sample : {1, 7, 33, 130}) {
      INFO("rate " << rate << ", per_sample " << per_sample);
      const int64_t batch = 5;
      const std::vector<float> x = to_float(random_vector(batch * per_sample, 42));
      std::vector<float> want(x.size()), y = nan_vector(x.size()), dx = nan_vector(x.size());
      ref::dropout_forward(x.data(), want.data(), batch, per_sample, 0, rate, key);
      // The mini-batch in two micro-batches, samples [0, 2) and [2, 5): the same mask.
      emu::dropout_forward(x.data(), y.data(), 2, per_sample, 0, rate, key, nullptr, stream);
      emu::dropout_forward(x.data() + 2 * per_sample, y.data() + 2 * per_sample, 3, per_sample, 2,
                           rate, key, nullptr, stream);
      emu::dropout_backward(x.data(), dx.data(), batch, per_sample, 0, rate, key, nullptr, stream);
      // The step read from memory (a graph's replay) instead of the key: key.step is ignored.
      const uint32_t step_word = key.step;
      DropoutKey other_step = key;
      other_step.step = key.step + 1;
      std::vector<float> y_word = nan_vector(x.size());
      emu::dropout_forward(x.data(), y_word.data(), batch, per_sample, 0, rate, other_step,
                           &step_word, stream);
      stream.synchronize();
      CHECK(all_equal("y", y.data(), want.data(), batch * per_sample));
      CHECK(all_equal("dx", dx.data(), want.data(), batch * per_sample));
      CHECK(all_equal("y, the step read from memory", y_word.data(), want.data(),
                      batch * per_sample));
    }
  }
  float v = 0.0f;
  CHECK_THROWS_AS(emu::dropout_forward(&v, &v, 1, 1, 0, 1.0f, key, nullptr, stream), std::invalid_argument);
}

TEST_CASE("elementwise add_to, scale, fill, copy are bit-identical to the reference") {
  testing::Deadline deadline("emulated elementwise");
  const Stream stream = emu_stream();
  for (int64_t n : kSizes) {
    INFO("n = " << n);
    const std::vector<float> x = to_float(random_vector(n, 43)), y0 = to_float(random_vector(n, 44));
    std::vector<float> want = y0, got = y0;
    ref::add_to(x.data(), want.data(), n);
    ref::scale(want.data(), -1.5f, n);
    emu::add_to(x.data(), got.data(), n, stream);
    emu::scale(got.data(), -1.5f, n, stream);
    std::vector<float> filled = nan_vector(n), copied = nan_vector(n), fill_ref(n);
    ref::fill(fill_ref.data(), 2.5f, n);
    emu::fill(filled.data(), 2.5f, n, stream);
    emu::copy(x.data(), copied.data(), n, stream);
    stream.synchronize();
    CHECK(all_equal("add_to+scale", got.data(), want.data(), n));
    CHECK(all_equal("fill", filled.data(), fill_ref.data(), n));
    CHECK(all_equal("copy", copied.data(), x.data(), n));
  }
}

TEST_CASE("sgd (plain, momentum, Nesterov, weight decay) and adam/adamw match the reference") {
  testing::Deadline deadline("emulated optimizers");
  const Stream stream = emu_stream();
  const int64_t n = 257;
  const std::vector<double> p0 = random_vector(n, 45), g0 = random_vector(n, 46);
  // Three steps each; the reference in double. Each update is a few float operations per
  // element (no reductions), so the error after three steps is a few ulps of the values
  // involved: 1e-6 absolute on O(1) parameters.
  SgdParams plain{.lr = 0.1};
  SgdParams momentum{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01};
  SgdParams nesterov{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true};
  for (const SgdParams& h : {plain, momentum, nesterov}) {
    INFO("sgd momentum " << h.momentum << " nesterov " << h.nesterov);
    std::vector<double> p = p0, buf(n, 0.0);
    std::vector<float> pf = to_float(p0), gf = to_float(g0), buff(n, 0.0f);
    for (int step = 0; step < 3; ++step) {
      ref::sgd_update(p.data(), g0.data(), buf.data(), n, h, step == 0);
      emu::sgd_update(pf.data(), gf.data(), buff.data(), n, h, step == 0, stream);
    }
    stream.synchronize();
    CHECK(all_close("p", pf.data(), p, 1e-6));
  }
  AdamParams adam{.lr = 1e-2, .weight_decay = 0.01};
  AdamParams adamw{.lr = 1e-2, .weight_decay = 0.1, .decoupled = true};
  for (const AdamParams& h : {adam, adamw}) {
    INFO("adam decoupled " << h.decoupled);
    std::vector<double> p = p0, m(n, 0.0), v(n, 0.0);
    std::vector<float> pf = to_float(p0), gf = to_float(g0), mf(n, 0.0f), vf(n, 0.0f);
    for (int step = 1; step <= 3; ++step) {
      ref::adam_update(p.data(), g0.data(), m.data(), v.data(), n, h, step);
      emu::adam_update(pf.data(), gf.data(), mf.data(), vf.data(), n, h, step, stream);
    }
    stream.synchronize();
    CHECK(all_close("p", pf.data(), p, 1e-6));
    CHECK(all_close("m", mf.data(), m, 1e-6));
  }
  float x = 0.0f;
  CHECK_THROWS_AS(emu::sgd_update(&x, &x, &x, 1, SgdParams{.nesterov = true}, true, stream),
                  std::invalid_argument);
}

TEST_CASE("softmax forward/backward, fused cross-entropy and accuracy match the reference") {
  testing::Deadline deadline("emulated softmax");
  const Stream stream = emu_stream();
  struct Rows {
    int64_t N, classes;
  };
  for (Rows r : {Rows{1, 1}, Rows{1, 10}, Rows{3, 7}, Rows{7, 33}, Rows{33, 10}, Rows{5, 100}}) {
    INFO("(N, classes) = (" << r.N << ", " << r.classes << ")");
    const int64_t n = r.N * r.classes;
    // Logits in [20, 100]: exp(100) overflows float (FLT_MAX is about e^88.7), so only the
    // max-shifted form gives finite results.
    std::vector<double> z = random_vector(n, 47, 20.0, 100.0), dy = random_vector(n, 48);
    const std::vector<float> zf = to_float(z), dyf = to_float(dy);
    z = to_double(zf);
    std::vector<int32_t> labels(r.N);
    for (int64_t i = 0; i < r.N; ++i) labels[i] = static_cast<int32_t>((i * 7 + 3) % r.classes);

    std::vector<double> y(n), dx(n), dlogits(n);
    ref::softmax_forward(z.data(), y.data(), r.N, r.classes);
    ref::softmax_backward(y.data(), dy.data(), dx.data(), r.N, r.classes);
    const double loss = ref::softmax_cross_entropy(z.data(), labels.data(), dlogits.data(), r.N,
                                                   r.classes, double(r.N) + 2);
    const int64_t correct = ref::accuracy_count(z.data(), labels.data(), r.N, r.classes);

    std::vector<float> yf = nan_vector(n), dxf = nan_vector(n), dlf = nan_vector(n);
    std::vector<float> workspace = nan_vector(emu::softmax_cross_entropy_workspace_floats(r.N));
    CrossEntropyResult result{NAN, -2, -2};
    unsigned long long correct_got = 12345;
    emu::softmax_forward(zf.data(), yf.data(), r.N, r.classes, stream);
    emu::softmax_backward(yf.data(), dyf.data(), dxf.data(), r.N, r.classes, stream);
    emu::softmax_cross_entropy(zf.data(), labels.data(), dlf.data(), r.N, r.classes,
                               float(r.N) + 2, workspace.data(), &result, stream);
    emu::accuracy_count(zf.data(), labels.data(), r.N, r.classes, &correct_got, stream);
    MicroBatchTally tally{NAN, -2, -2, -2};
    int32_t word = 0;  // the step's verdict word: every label is in the classes, left alone
    emu::tally_cross_entropy(zf.data(), labels.data(), r.N, r.classes, &result, &tally, &word, 7,
                             stream);
    stream.synchronize();

    // softmax: exp has a few ulps of error, the row sum adds sqrt(classes)·eps relative.
    std::vector<double> ones(n, 1.0);
    const std::vector<double> rel = sum_tolerance(ones, r.classes);
    std::vector<double> y_tol(n), dx_tol(n);
    for (int64_t i = 0; i < n; ++i) {
      y_tol[i] = (rel[i] + 4 * kFloatEps) * y[i] + 1e-30;
      // dx = y·(dy - <dy, y>): the dot's error (classes terms of size <= 1) dominates.
      dx_tol[i] = y_tol[i] * (std::fabs(dy[i]) + 1.0) + rel[i] * y[i] * 2.0 + 1e-30;
    }
    CHECK(all_close("softmax", yf.data(), y, y_tol));
    CHECK(all_close("softmax dx", dxf.data(), dx, dx_tol));
    // dlogits = (softmax - onehot) / normaliser: softmax's error, plus the rounding of the
    // subtraction (eps relative to 1) and of the division.
    std::vector<double> dl_tol(n);
    for (int64_t i = 0; i < n; ++i) dl_tol[i] = (y_tol[i] + 2 * kFloatEps) / (double(r.N) + 2);
    CHECK(all_close("dlogits", dlf.data(), dlogits, dl_tol));
    // Each row loss is log-sum-exp of shifted values: errors of a few eps times its size
    // (log of up to `classes`, plus the shifted logit, at most 80 here), then N are summed.
    CHECK(result.bad_row == -1);
    CHECK(std::fabs(result.loss - loss) <=
          4 * std::sqrt(double(r.N)) * kFloatEps * (std::fabs(loss) + 100.0));
    CHECK(correct_got == static_cast<unsigned long long>(correct));
    // The tally: the same count, the loss's result as it is (bits), no bad row.
    CHECK(tally.correct == correct);
    CHECK(std::memcmp(&tally.loss, &result.loss, sizeof(float)) == 0);
    CHECK(tally.bad_row == -1);
    CHECK(word == 0);
  }
}

TEST_CASE("softmax_cross_entropy reports a bad label through its result, like the reference") {
  const Stream stream = emu_stream();
  const int64_t N = 5, classes = 3;
  std::vector<float> z = to_float(random_vector(N * classes, 49)), dl = nan_vector(N * classes);
  std::vector<int32_t> labels = {0, 2, 3, 1, -1};  // rows 2 and 4 are bad; row 2 is first
  std::vector<float> workspace(N);
  CrossEntropyResult result{};
  emu::softmax_cross_entropy(z.data(), labels.data(), dl.data(), N, classes, 5.0f,
                             workspace.data(), &result, stream);
  stream.synchronize();
  CHECK(result.bad_row == 2);
  CHECK(result.bad_label == 3);
  CHECK(std::isnan(result.loss));
  CHECK(std::isnan(dl[2 * classes]));
  CHECK(!std::isnan(dl[0]));
  CHECK_THROWS_WITH_AS(check_cross_entropy_result(result, classes),
                       doctest::Contains("label 3 of row 2 is outside [0, 3)"), std::out_of_range);
  // The tally of the micro-batch carries the bad row and its label to the host, and writes the
  // label check's failure into a step's verdict word (the larger word stays: atomicMax).
  MicroBatchTally tally{};
  int32_t word = 5;
  emu::tally_cross_entropy(z.data(), labels.data(), N, classes, &result, &tally, &word, 7, stream);
  emu::tally_cross_entropy(z.data(), labels.data(), N, classes, &result, &tally, &word, 6, stream);
  MicroBatchTally without_word{};
  emu::tally_cross_entropy(z.data(), labels.data(), N, classes, &result, &without_word, nullptr, 9,
                           stream);
  stream.synchronize();
  CHECK(word == 7);
  CHECK(std::memcmp(&without_word, &tally, sizeof(tally)) == 0);
  CHECK(tally.bad_row == 2);
  CHECK(tally.bad_label == 3);
  CHECK(std::isnan(tally.loss));
}

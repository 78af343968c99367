// The kernels of a training step's end, on a GPU (natively on a real one, through the
// emulated CUDA runtime in CI): the multi-tensor optimizer updates and the zeroing of
// gradients (one launch for every tensor of a stage) against the per-tensor kernels and the
// reference, and the step's verdict (kernels/step_verdict.h) that those updates obey. Part
// of test_cuda_vendor, whose main (vendor_test.cpp) skips without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "kernels/micro_batch_tally.h"
#include "kernels/ops.h"
#include "kernels/reference/optimizers.h"
#include "kernels/step_verdict.h"
#include "tests/kernels/cpu/check.h"

using namespace brigade;
using namespace brigade::test;

// The multi-tensor updates (ops::TensorTable, one launch for every tensor of a stage) against
// the per-tensor kernels, bit for bit, and against the float reference, on tensors of 1
// element, one block, a block and one, and sizes that are no multiple of the block. Three
// steps each: SGD with momentum (its first step copies the gradient), Nesterov SGD with weight
// decay, Adam, AdamW; then the gradients zeroed by one fill.
TEST_CASE("multi-tensor SGD, Adam, AdamW and zeroing: the per-tensor kernels' bits, the reference's values") {
  const Stream stream = Stream::create(Device::cuda(0));
  const std::vector<int64_t> sizes = {1, 3, 256, 257, 1000, 4099};
  const std::vector<SgdParams> sgds = {{.lr = 0.05, .momentum = 0.9},
                                       {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true}};
  const std::vector<AdamParams> adams = {{.lr = 1e-2, .weight_decay = 0.01},
                                         {.lr = 1e-2, .weight_decay = 0.01, .decoupled = true}};
  const auto tensor = [&](const std::vector<float>& v) {
    return Tensor::from_vector(v, Shape({static_cast<int64_t>(v.size())}), stream);
  };
  // Per tensor k: parameters, gradients, two state tensors; the same values for both ways.
  struct Host {
    std::vector<float> p, g, s1, s2;
  };
  std::vector<Host> start;
  for (size_t k = 0; k < sizes.size(); ++k) {
    start.push_back({to_float(random_vector(sizes[k], 40 + k)), to_float(random_vector(sizes[k], 60 + k)),
                     std::vector<float>(sizes[k], 0.0f), std::vector<float>(sizes[k], 0.0f)});
  }
  const auto run = [&](bool all_at_once, const auto& update) {
    std::vector<ops::TensorTable::Row> rows;
    for (const Host& h : start) rows.push_back({tensor(h.p), tensor(h.g), tensor(h.s1), tensor(h.s2)});
    const ops::TensorTable table(rows, stream);
    for (int step = 1; step <= 3; ++step) update(all_at_once, table, rows, step);
    std::vector<std::vector<float>> out;
    for (const auto& r : rows) out.push_back(r[0].to_vector());
    return out;
  };
  const auto check_against_reference = [&](const char* what, const std::vector<std::vector<float>>& got,
                                            const auto& reference) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      Host h = start[k];
      for (int step = 1; step <= 3; ++step) reference(h, step);
      CAPTURE(sizes[k]);
      // The same float operations in the same order; a GPU may contract a·b + c into one FMA.
      CHECK(all_close(what, got[k].data(), std::vector<double>(h.p.begin(), h.p.end()), 1e-6));
    }
  };
  for (const SgdParams& h : sgds) {
    const auto update = [&](bool all, const ops::TensorTable& table,
                            const std::vector<ops::TensorTable::Row>& rows, int step) {
      if (all) return ops::sgd_step_all(table, h, step == 1, Tensor(), stream);
      for (const auto& r : rows) ops::sgd_step(r[0], r[1], r[2], h, step == 1, stream);
    };
    const auto many = run(true, update);
    CHECK(many == run(false, update));  // bit for bit: == on floats, none is NaN
    check_against_reference("sgd", many, [&](Host& x, int step) {
      ref::sgd_update(x.p.data(), x.g.data(), x.s1.data(), static_cast<int64_t>(x.p.size()), h, step == 1);
    });
  }
  for (const AdamParams& h : adams) {
    const auto update = [&](bool all, const ops::TensorTable& table,
                            const std::vector<ops::TensorTable::Row>& rows, int step) {
      if (all) return ops::adam_step_all(table, h, step, Tensor(), stream);
      for (const auto& r : rows) ops::adam_step(r[0], r[1], r[2], r[3], h, step, stream);
    };
    const auto many = run(true, update);
    CHECK(many == run(false, update));
    check_against_reference(h.decoupled ? "adamw" : "adam", many, [&](Host& x, int step) {
      ref::adam_update(x.p.data(), x.g.data(), x.s1.data(), x.s2.data(),
                       static_cast<int64_t>(x.p.size()), h, step);
    });
  }
  // Zeroing: every gradient of the table, nothing beyond (a neighbour allocation keeps its value).
  std::vector<ops::TensorTable::Row> grads;
  for (const Host& h : start) grads.push_back({tensor(h.g), Tensor(), Tensor(), Tensor()});
  ops::fill_all(ops::TensorTable(grads, stream), 0.0f, stream);
  for (size_t k = 0; k < sizes.size(); ++k)
    CHECK(grads[k][0].to_vector() == std::vector<float>(static_cast<size_t>(sizes[k]), 0.0f));
}

// A step's verdict on a GPU (kernels/step_verdict.h): each check writes its failure's word
// only when it fails, the earliest failure (smallest stage) wins whatever the order of the
// checks, and the multi-tensor updates change nothing once any word holds a failure.
TEST_CASE("a step's verdict: the checks keep the first failure; the updates obey it") {
  const Stream stream = Stream::default_for(Device::cuda(0));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto words = [&](const Tensor& verdict) {
    const std::vector<float> bits = verdict.to_vector();
    std::vector<int32_t> w(bits.size());
    std::memcpy(w.data(), bits.data(), bits.size() * sizeof(float));
    return w;
  };
  const Tensor verdict = Tensor::zeros(Shape({3}), stream);
  const Tensor finite = Tensor::from_vector({1, -2, 3e38f}, Shape({3}), stream);
  const Tensor with_nan = Tensor::from_vector({1, nan, 3}, Shape({3}), stream);
  const Tensor with_inf = Tensor::from_vector({-inf, 0}, Shape({2}), stream);
  const int32_t stage2 = step_check_word(2, 1, StepCheck::output_finite);
  const int32_t stage1 = step_check_word(1, 3, StepCheck::loss_finite);
  ops::step_verdict_check_finite(finite, verdict, 0, step_check_word(0, 0, StepCheck::output_finite),
                                 stream);
  ops::step_verdict_check_finite(with_nan, verdict, 1, stage2, stream);  // the later stage first
  ops::step_verdict_check_finite(with_nan, verdict, 1, stage1, stream);
  ops::step_verdict_check_finite(with_inf, verdict, 2, stage2, stream);
  CHECK(words(verdict) == std::vector<int32_t>{kStepOk, stage1, stage2});
  const StepCheckFailure f = step_check_failure(stage1);
  CHECK(f.stage == 1);
  CHECK(f.microbatch == 3);
  CHECK(f.check == StepCheck::loss_finite);

  // The label check is the tally's launch: a micro-batch whose labels are all in the classes
  // leaves its word alone, one with a label outside them writes its failure, and the tally's
  // row says which row and label, as without a word.
  const Tensor logits = Tensor::from_vector({1, 2, 0, 3, 0, 1}, Shape({2, 3}), stream);
  const Tensor tally = Tensor::zeros(Shape({2, kTallyFloats}), stream);
  const Tensor labels = Tensor::zeros(Shape({2}), stream);
  const int32_t row0 = step_check_word(4, 0, StepCheck::labels);
  const int32_t row1 = step_check_word(4, 1, StepCheck::labels);
  const auto tally_of = [&](const std::vector<int32_t>& targets, int64_t slot, int32_t failed) {
    const Tensor t = ops::labels_tensor(targets, stream);
    const ops::LossResult r = ops::softmax_cross_entropy(logits, t, 2.0f, stream);
    const ops::VerdictWord word{labels, slot, failed};
    ops::tally_cross_entropy(logits, t, r, tally, slot, stream, &word);
  };
  tally_of({1, 0}, 0, row0);
  tally_of({1, 9}, 1, row1);
  CHECK(words(labels) == std::vector<int32_t>{kStepOk, row1});
  const std::vector<float> rows = tally.to_vector();
  MicroBatchTally good{}, bad{};
  std::memcpy(&good, rows.data(), sizeof(good));
  std::memcpy(&bad, rows.data() + kTallyFloats, sizeof(bad));
  CHECK(good.bad_row == -1);
  CHECK(good.correct == 2);
  CHECK(bad.bad_row == 1);
  CHECK(bad.bad_label == 9);

  // The updates: a passing verdict updates as no verdict does; a failed one changes nothing.
  const std::vector<float> p0 = {1, 2, 3, 4}, g0 = {0.5f, -1, 2, 0.25f};
  const auto updated = [&](const Tensor& obeyed, bool adam) {
    const Tensor p = Tensor::from_vector(p0, Shape({4}), stream);
    const Tensor g = Tensor::from_vector(g0, Shape({4}), stream);
    const Tensor m = Tensor::zeros(Shape({4}), stream), v = Tensor::zeros(Shape({4}), stream);
    const ops::TensorTable table({{p, g, m, adam ? v : Tensor()}}, stream);
    if (adam)
      ops::adam_step_all(table, AdamParams{.lr = 0.1}, 1, obeyed, stream);
    else
      ops::sgd_step_all(table, SgdParams{.lr = 0.1, .momentum = 0.9}, true, obeyed, stream);
    return p.to_vector();
  };
  const Tensor passed = Tensor::zeros(Shape({3}), stream);
  for (const bool adam : {false, true}) {
    CAPTURE(adam);
    const std::vector<float> plain = updated(Tensor(), adam);
    CHECK(plain != p0);
    CHECK(updated(passed, adam) == plain);
    CHECK(updated(verdict, adam) == p0);  // words 1 and 2 failed
    CHECK(updated(labels, adam) == p0);
  }
}

// The Runtime applies the loss it is given (RuntimeOptions::loss, loss.h), not one of its own:
// a loss that counts twice the cross-entropy trains exactly as the cross-entropy does at twice
// the learning rate (both scale the update by 2, a power of two, so the bits agree), and what
// it tallies (its loss and its correct count, loss.h) is what a step reports: a loss that counts
// other samples as correct than the built-in count does is reported with its own count.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "pipeline/runtime/loss.h"
#include "pipeline/schedule/generators/generators.h"
#include "tests/pipeline/runtime/runtime_model.h"

namespace brigade::pipeline {
namespace {

// Twice the cross-entropy (its normaliser halved), tallied as the cross-entropy tallies: the
// loss in its tally is the doubled one.
class DoubledCrossEntropy final : public Loss {
 public:
  ops::LossResult apply(const Tensor& output, const Tensor& targets, float normaliser,
                        const Stream& stream) const override {
    return plain_.apply(output, targets, normaliser / 2, stream);
  }
  void check_status(const Tensor& host_status, const Shape& output) const override {
    plain_.check_status(host_status, output);
  }
  void tally(const Tensor& output, const Tensor& targets, const ops::LossResult& result,
             const Tensor& tally, int64_t slot, const Stream& stream,
             const ops::VerdictWord* labels_verdict) const override {
    plain_.tally(output, targets, result, tally, slot, stream, labels_verdict);
  }

 private:
  SoftmaxCrossEntropy plain_;
};

// The cross-entropy, but a sample counts as correct when its first largest logit is class
// `k`, whatever its label: a count that differs from the built-in one on purpose. Over k = 0,
// 1, 2 (the test model's classes) the counts add up to the batch, since each row has exactly
// one first largest logit; three built-in counts would not.
class CountsClass final : public Loss {
 public:
  explicit CountsClass(int32_t k) : k_(k) {}
  ops::LossResult apply(const Tensor& output, const Tensor& targets, float normaliser,
                        const Stream& stream) const override {
    return plain_.apply(output, targets, normaliser, stream);
  }
  void check_status(const Tensor& host_status, const Shape& output) const override {
    plain_.check_status(host_status, output);
  }
  void tally(const Tensor& output, const Tensor& targets, const ops::LossResult& result,
             const Tensor& tally, int64_t slot, const Stream& stream,
             const ops::VerdictWord* labels_verdict) const override {
    const Tensor all_k =  // (rows) int32: every row labelled k
        ops::labels_tensor(std::vector<int32_t>(static_cast<size_t>(targets.shape()[0]), k_), stream);
    plain_.tally(output, all_k, result, tally, slot, stream, labels_verdict);
  }

 private:
  int32_t k_;
  SoftmaxCrossEntropy plain_;
};

constexpr int kBatch = 12;

std::unique_ptr<layers::Optimizer> sgd_at(double lr, std::vector<layers::Parameter*> params) {
  return std::make_unique<layers::SGD>(std::move(params), SgdParams{.lr = lr});
}

struct Trained {
  StepResult result;
  std::vector<std::vector<float>> params;
};

// One 1f1b step of the test model over two devices, m = 3, with `loss` and SGD at `lr`.
Trained one_step(std::shared_ptr<const Loss> loss, double lr) {
  const Partition partition = at_cuts(test::small_spec().layers.size(), {4});
  auto model = test::placed_model(partition, 2, /*first_device=*/70);
  Runtime runtime(*model, test::test_devices(2, 70), partition, make_schedule("1f1b", 2, 3),
                  [lr](auto params) { return sgd_at(lr, std::move(params)); },
                  test::runtime_options({.seed = test::kDropoutSeed, .loss = std::move(loss)}));
  Trained t;
  t.result = runtime.step(test::random_batch(kBatch, 500), 0);
  t.params = test::params_of(*model);
  return t;
}

TEST_CASE("the runtime trains on the loss it is given, and reports what that loss tallies") {
  const Trained plain = one_step(std::make_shared<SoftmaxCrossEntropy>(), 0.2);
  const Trained doubled = one_step(std::make_shared<DoubledCrossEntropy>(), 0.1);
  CHECK(doubled.result.loss == doctest::Approx(2 * plain.result.loss).epsilon(1e-6));
  CHECK(doubled.result.correct == plain.result.correct);  // the same logits, the same count
  test::check_close(doubled.params, plain.params, /*exact=*/!test::on_cuda());
}

TEST_CASE("a step reports a custom loss's own correct count, not the built-in one") {
  const Trained plain = one_step(std::make_shared<SoftmaxCrossEntropy>(), 0.2);
  // Were each step to report the built-in count, the three below would add up to this:
  REQUIRE(3 * plain.result.correct != kBatch);
  int64_t counted = 0;
  for (int32_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    const Trained by_class = one_step(std::make_shared<CountsClass>(k), 0.2);
    counted += by_class.result.correct;
    // The same loss, the same training (to the bit where the device's kernels are repeatable).
    CHECK(by_class.result.loss == doctest::Approx(plain.result.loss).epsilon(1e-6));
    test::check_close(by_class.params, plain.params, /*exact=*/!test::on_cuda());
  }
  CHECK(counted == kBatch);
}

TEST_CASE("a runtime without a loss is refused, naming the option") {
  const Partition partition = at_cuts(test::small_spec().layers.size(), {});
  auto model = test::placed_model(partition, 1, /*first_device=*/70);
  CHECK_THROWS_WITH_AS(Runtime(*model, test::test_devices(1, 70), partition,
                               make_schedule("1f1b", 1, 2), test::sgd, {.loss = nullptr}),
                       doctest::Contains("RuntimeOptions::loss is null"), Error);
}

}  // namespace
}  // namespace brigade::pipeline

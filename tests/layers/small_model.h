// The small model of the autodiff tests, its data, and one training pass written out:
//   Conv2D(2, 3x3, relu) on 6x6x1 -> MaxPooling2D(2x2) -> Dropout(0.25) -> Flatten ->
//   Dense(3, softmax)   ((1,2,4,4) -> (1,2,2,2) -> 8 -> 3 logits; 18 + 2 + 24 + 3 = 47 params)
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/tensor.h"
#include "kernels/ops.h"
#include "layers/sequential.h"

namespace brigade::layers::test {

inline constexpr int64_t kSide = 6, kClasses = 3;
inline constexpr float kRate = 0.25f;

inline std::unique_ptr<Sequential> small_model(uint64_t seed) {
  auto m = std::make_unique<Sequential>(seed);
  m->add(Conv2D(2, {3, 3}, "relu", {kSide, kSide, 1}));
  m->add(MaxPooling2D({2, 2}));
  m->add(Dropout(kRate));
  m->add(Flatten());
  m->add(Dense(kClasses, "softmax"));
  return m;
}

// n samples of (1, 6, 6) uniform in [-1, 1), labels in [0, 3), from `seed`.
struct Batch {
  std::vector<float> x;        // (n, 1, 6, 6)
  std::vector<int32_t> labels;  // (n)
  int64_t n = 0;
};

inline Batch random_batch(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Batch b;
  b.n = n;
  for (int64_t i = 0; i < n * kSide * kSide; ++i) b.x.push_back(u(gen));
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(gen() % kClasses));
  return b;
}

// Samples [begin, end) of a batch.
inline Batch slice(const Batch& b, int64_t begin, int64_t end) {
  Batch s;
  s.n = end - begin;
  const int64_t per = kSide * kSide;
  s.x.assign(b.x.begin() + begin * per, b.x.begin() + end * per);
  s.labels.assign(b.labels.begin() + begin, b.labels.begin() + end);
  return s;
}

inline Tensor input_of(const Batch& b) {
  return Tensor::from_vector(b.x, Shape({b.n, 1, kSide, kSide}), Device::cpu(0));
}

// Forward with a tape (dropout on, step `step`, samples from `offset` of a mini-batch of
// `normaliser` samples), then the loss; returns {loss, dlogits}.
inline ops::LossResult forward_loss(Sequential& m, const Batch& b, Tape& tape, int64_t offset,
                                    float normaliser, uint64_t seed = 11, uint32_t step = 3) {
  ForwardContext ctx;
  ctx.seed = seed;
  ctx.step = step;
  ctx.sample_offset = offset;
  ctx.tape = &tape;
  Tensor logits = m.forward(input_of(b), ctx);
  const Stream s = Stream::default_for(Device::cpu(0));
  return ops::softmax_cross_entropy(logits, ops::labels_tensor(b.labels, s), normaliser, s);
}

// Every parameter gradient, concatenated in parameter order.
inline std::vector<std::vector<float>> grads_of(Sequential& m) {
  std::vector<std::vector<float>> g;
  for (Parameter* p : m.parameters()) g.push_back(p->grad.to_vector());
  return g;
}

}  // namespace brigade::layers::test

#include "tools/train/evaluate.h"

#include <algorithm>
#include <vector>

#include "kernels/ops.h"
#include "tools/data/batches.h"

namespace brigade::train {

std::optional<Evaluation> evaluate(layers::Sequential& model, const data::Dataset& test,
                                   int64_t batch, const std::function<bool()>& stopped) {
  batch = std::min(batch, test.count);  // a --batch larger than the test set: one batch of it
  data::Batcher batches(test, {.batch_size = batch, .shuffle = false, .drop_last = false});
  std::vector<float> x(static_cast<size_t>(batch * test.sample_size()));  // (B, C, H, W)
  std::vector<int32_t> y(static_cast<size_t>(batch));                      // (B)
  const Device first = model.layer(0).device();
  const Device last = model.layer(model.size() - 1).device();
  const Stream out = Stream::default_for(last);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t k = 0; k < batches.batches_per_epoch(); ++k) {
    if (stopped && stopped()) return std::nullopt;
    const int64_t rows = batches.fill(0, k, x, y);
    x.resize(static_cast<size_t>(rows * test.sample_size()));  // shrinks only: no allocation
    y.resize(static_cast<size_t>(rows));
    const Tensor images = Tensor::from_vector(
        x, Shape({rows, test.channels, test.height, test.width}), first);
    layers::ForwardContext ctx;
    ctx.training = false;  // no tape: activations are freed as soon as they are used
    const Tensor logits = model.forward(images, ctx);  // (rows, classes)
    const Tensor labels = ops::labels_tensor(y, out);
    // normaliser 1: the sum over the rows; divided by the count at the end
    loss_sum += ops::loss_value(ops::softmax_cross_entropy(logits, labels, 1.0f, out));
    correct += ops::accuracy_count(logits, labels, out);
  }
  const double n = static_cast<double>(test.count);
  return Evaluation{loss_sum / n, static_cast<double>(correct) / n};
}

}  // namespace brigade::train

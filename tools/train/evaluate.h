// Test-set evaluation: the whole model in no-grad mode (no tape, no dropout), batch by batch
// (brigade-train gives a training micro-batch's rows: training.h), over the devices it is
// placed on (activations move across in stream order, as in the naive placement), summing
// the cross-entropy and the correct predictions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "layers/sequential.h"
#include "tools/data/dataset.h"

namespace brigade::train {

struct Evaluation {
  double loss = 0;      // mean cross-entropy per sample
  double accuracy = 0;  // fraction right, in [0, 1]
};

// Nothing when `stopped` says so before a batch (a stop signal: a large test set takes a
// while, and a stop is not made to wait for it).
std::optional<Evaluation> evaluate(layers::Sequential& model, const data::Dataset& test,
                                   int64_t batch, const std::function<bool()>& stopped = {});

}  // namespace brigade::train

// Clipping by the global norm, PyTorch's clip_grad_norm_(parameters, max_norm) with the
// 2-norm: when the gradients of ALL the model's parameters, taken as one vector g, have
// ||g|| > max_norm, every gradient is scaled by max_norm / (||g|| + 1e-6).
//
// In a pipeline each stage sees only its own gradients, so the norm is assembled from parts:
// squared_norms() gives each parameter's sum of squares, the caller puts the parts of every
// stage in the model's parameter order, and clip_coefficient() sums them in that order. One
// device and any cut into stages therefore find the same norm to the last bit, and clip to
// the same parameters (tests/layers/grad_clip_test.cpp, tests/pipeline/runtime/parity_test.cpp).
//
// The sums are taken on the host in double: squared_norms() copies each gradient out and
// waits (one host synchronisation of the update, only where clipping is asked for).
#pragma once

#include <optional>
#include <vector>

#include "engine/stream.h"
#include "layers/tape.h"

namespace brigade::layers {

// Per parameter, in the order given: the sum of its gradient's squares, element by element
// in order, in double. Blocking; the gradients' writers must have finished (the caller
// synchronises the streams that wrote them).
std::vector<double> squared_norms(const std::vector<Parameter*>& params);

// min(1, max_norm / (sqrt(sum of squared_norms in order) + 1e-6)): what every gradient is
// multiplied by. max_norm must be > 0. A non-finite norm gives 0 (Inf) or NaN, and the scaled
// gradients stay non-finite (0 · Inf is NaN): a diverged step is not hidden by the clipping.
double clip_coefficient(const std::vector<double>& squared_norms, double max_norm);

// Every gradient *= coefficient, on `stream` if given, else on each parameter's own stream;
// nothing when the coefficient is 1 (the gradients keep their bits).
void scale_gradients(const std::vector<Parameter*>& params, double coefficient,
                     const std::optional<Stream>& stream = std::nullopt);

}  // namespace brigade::layers

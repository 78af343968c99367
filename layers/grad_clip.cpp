#include "layers/grad_clip.h"

#include <cmath>

#include "engine/error.h"
#include "kernels/ops.h"

namespace brigade::layers {

std::vector<double> squared_norms(const std::vector<Parameter*>& params) {
  std::vector<double> out;
  out.reserve(params.size());
  for (const Parameter* p : params) {
    double sum = 0;
    for (float g : p->grad.to_vector()) sum += static_cast<double>(g) * static_cast<double>(g);
    out.push_back(sum);
  }
  return out;
}

double clip_coefficient(const std::vector<double>& squared_norms, double max_norm) {
  BRIGADE_CHECK(max_norm > 0, "gradient clipping: the largest norm must be > 0, not " << max_norm);
  double total = 0;
  for (double s : squared_norms) total += s;
  const double coefficient = max_norm / (std::sqrt(total) + 1e-6);  // PyTorch's epsilon
  return std::isnan(coefficient) || coefficient < 1 ? coefficient : 1.0;
}

void scale_gradients(const std::vector<Parameter*>& params, double coefficient,
                     const std::optional<Stream>& stream) {
  if (coefficient == 1) return;
  for (Parameter* p : params)
    ops::scale(p->grad, static_cast<float>(coefficient), stream ? *stream : p->value.stream());
}

}  // namespace brigade::layers

#include "tools/train/divergence.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "layers/model/layer_spec.h"
#include "layers/param_file.h"

namespace brigade::train {

std::string format_value(double v) {
  if (std::isnan(v)) return "nan";  // printf would say "-nan" for some NaNs
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string first_non_finite(std::span<const float> values, const std::string& name,
                             const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      return name + " " + model::format_dims(dims) + " holds " + format_value(values[i]) +
             " at element " + std::to_string(i);
  return "";
}

std::string first_non_finite(const std::vector<layers::NamedTensor>& tensors) {
  for (const layers::NamedTensor& t : tensors) {
    const std::vector<float> host = t.tensor.to_vector();  // waits for the tensor's stream
    std::string found = first_non_finite(host, t.name, t.tensor.shape().dims());
    if (!found.empty()) return found;
  }
  return "";
}

std::vector<layers::NamedTensor> named(const std::vector<layers::Parameter*>& params) {
  std::vector<layers::NamedTensor> out;
  for (const layers::Parameter* p : params) out.push_back({p->name, p->value});
  return out;
}

safetensors::Dtype load_if_finite(const std::vector<layers::Parameter*>& params,
                                  const std::string& path) {
  const safetensors::Dtype dtype = layers::load_parameters(params, path);
  const std::string bad = first_non_finite(named(params));
  if (!bad.empty())
    throw std::runtime_error("--init-from " + path + ": " + bad +
                             ": refusing parameters that are not finite");
  return dtype;
}

void save_if_finite(const std::vector<layers::Parameter*>& params, const std::string& path,
                    int64_t step, safetensors::Dtype dtype) {
  const std::string bad = first_non_finite(named(params));
  if (!bad.empty())
    throw std::runtime_error(diverged(step, "refusing to write --save " + path + ", " + bad));
  layers::save_parameters(params, path, {}, dtype);
}

std::string diverged(int64_t step, const std::string& what) {
  return "step " + std::to_string(step) + ": " + what + ": training diverged (try a smaller --lr)";
}

std::optional<pipeline::StepResult> naming_divergence(
    const std::function<std::optional<pipeline::StepResult>()>& step) {
  try {
    return step();
  } catch (const pipeline::PipelineError& e) {
    // The runtime's NaN check says "non-finite value" (pipeline/runtime/step_checks.cpp); a
    // PipelineError has no kind to ask instead.
    if (std::string(e.what()).find("non-finite value") == std::string::npos) throw;
    throw std::runtime_error(diverged(static_cast<int64_t>(e.step()) + 1, e.what()));
  }
}

}  // namespace brigade::train

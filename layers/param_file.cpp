#include "layers/param_file.h"

#include <cstring>

#include "layers/model/safetensors.h"

namespace brigade::layers {

namespace st = brigade::safetensors;

void save_parameters(const std::vector<Parameter*>& params, const std::string& path,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<std::vector<float>> host;  // keeps the bytes alive until written
  host.reserve(params.size());
  std::vector<st::TensorToWrite> tensors;
  for (const Parameter* p : params) {
    host.push_back(p->value.to_vector());
    const std::vector<float>& v = host.back();
    tensors.push_back({p->name, st::Dtype::F32, p->value.shape().dims(),
                       {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)}});
  }
  st::write_file(path, tensors, metadata);
}

void load_parameters(const std::vector<Parameter*>& params, const std::string& path) {
  const st::File file = st::read_file(path);
  std::vector<st::Expected> expected;
  for (const Parameter* p : params)
    expected.push_back({p->name, st::Dtype::F32, p->value.shape().dims()});
  st::check(file, expected);  // throws listing every mismatch; nothing is loaded then
  for (Parameter* p : params) {
    const std::span<const uint8_t> bytes = file.bytes(*file.find(p->name));
    std::vector<float> values(static_cast<size_t>(p->value.numel()));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    const Stream& s = p->value.stream();
    const Tensor staged = Tensor::from_vector(values, p->value.shape(), s);
    copy_async(p->value, staged, s);  // into the existing storage: the optimizer keeps it
  }
  for (Parameter* p : params) p->value.stream().synchronize();
}

std::vector<st::Expected> parameter_layout(const model::ModelSpec& spec) {
  std::vector<st::Expected> tensors;
  for (const model::LayerShape& l : model::infer_shapes(spec.input, spec.layers).layers)
    for (const model::ParamSpec& p : l.param_specs) tensors.push_back({p.name, st::Dtype::F32, p.shape});
  return tensors;
}

}  // namespace brigade::layers

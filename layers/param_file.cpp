#include "layers/param_file.h"

#include <cstring>

#include "kernels/cpu/bf16.h"
#include "layers/model/safetensors.h"

namespace brigade::layers {

namespace st = brigade::safetensors;

namespace {

void require_parameter_dtype(st::Dtype dtype, const std::string& path) {
  if (dtype != st::Dtype::F32 && dtype != st::Dtype::BF16)
    throw st::Error(path + ": parameters are written as F32 or BF16, not " +
                    std::string(st::dtype_name(dtype)));
}

// The bytes of one tensor of `dtype` holding `values` (float32, row-major): little-endian,
// as safetensors stores them (and as every processor Brigade runs on holds them).
std::vector<uint8_t> encode(const std::vector<float>& values, st::Dtype dtype) {
  std::vector<uint8_t> bytes(values.size() * st::dtype_size(dtype));
  if (dtype == st::Dtype::F32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    std::vector<cpu::bf16> rounded(values.size());
    cpu::float_to_bf16(values.data(), rounded.data(), static_cast<int64_t>(values.size()));
    std::memcpy(bytes.data(), rounded.data(), bytes.size());
  }
  return bytes;
}

// The float32 values of one tensor's bytes (F32 copied, BF16 widened exactly).
std::vector<float> decode(std::span<const uint8_t> bytes, st::Dtype dtype) {
  std::vector<float> values(bytes.size() / st::dtype_size(dtype));
  if (dtype == st::Dtype::F32) {
    std::memcpy(values.data(), bytes.data(), bytes.size());
  } else {
    std::vector<cpu::bf16> stored(values.size());
    std::memcpy(stored.data(), bytes.data(), bytes.size());
    cpu::bf16_to_float(stored.data(), values.data(), static_cast<int64_t>(values.size()));
  }
  return values;
}

}  // namespace

void save_parameters(const std::vector<Parameter*>& params, const std::string& path,
                     const std::map<std::string, std::string>& metadata, st::Dtype dtype) {
  require_parameter_dtype(dtype, path);
  std::vector<std::vector<uint8_t>> host;  // keeps the bytes alive until written
  host.reserve(params.size());
  std::vector<st::TensorToWrite> tensors;
  for (const Parameter* p : params) {
    host.push_back(encode(p->value.to_vector(), dtype));
    tensors.push_back({p->name, dtype, p->value.shape().dims(), host.back()});
  }
  st::write_file(path, tensors, metadata);
}

st::Dtype load_parameters(const std::vector<Parameter*>& params, const std::string& path) {
  const st::File file = st::read_file(path);
  // The file's dtype is its first parameter's, when that is BF16; every tensor must have it.
  st::Dtype dtype = st::Dtype::F32;
  if (!params.empty())
    if (const st::TensorInfo* first = file.find(params.front()->name))
      if (first->dtype == st::Dtype::BF16) dtype = st::Dtype::BF16;
  std::vector<st::Expected> expected;
  for (const Parameter* p : params) expected.push_back({p->name, dtype, p->value.shape().dims()});
  st::check(file, expected);  // throws listing every mismatch; nothing is loaded then
  for (Parameter* p : params) {
    const std::vector<float> values = decode(file.bytes(*file.find(p->name)), dtype);
    const Stream& s = p->value.stream();
    const Tensor staged = Tensor::from_vector(values, p->value.shape(), s);
    copy_async(p->value, staged, s);  // into the existing storage: the optimizer keeps it
  }
  for (Parameter* p : params) p->value.stream().synchronize();
  return dtype;
}

std::vector<st::Expected> parameter_layout(const model::ModelSpec& spec, st::Dtype dtype) {
  std::vector<st::Expected> tensors;
  for (const model::LayerShape& l : model::infer_shapes(spec.input, spec.layers).layers)
    for (const model::ParamSpec& p : l.param_specs) tensors.push_back({p.name, dtype, p.shape});
  return tensors;
}

}  // namespace brigade::layers

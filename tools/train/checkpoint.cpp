#include "tools/train/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "engine/error.h"
#include "layers/model/safetensors.h"
#include "layers/param_file.h"
#include "tools/train/divergence.h"

namespace brigade::train {

namespace st = brigade::safetensors;

namespace {

constexpr const char* kFormat = "brigade-train checkpoint 1";

// Every tensor of a checkpoint: the parameters, then the optimizer's state.
std::vector<layers::NamedTensor> tensors_of(const std::vector<layers::Parameter*>& params,
                                            const std::vector<layers::Optimizer*>& optimizers) {
  std::vector<layers::NamedTensor> all;
  for (layers::Parameter* p : params) all.push_back({p->name, p->value});
  for (layers::Optimizer* o : optimizers)
    for (layers::NamedTensor& t : o->state()) all.push_back(std::move(t));
  return all;
}

// The checkpoint's "__metadata__": where the run stands, and what it must agree on to resume.
std::map<std::string, std::string> metadata(const model::ModelSpec& model, const Recipe& recipe,
                                            const ResumePoint& resume_point, int64_t optimizer_steps) {
  std::map<std::string, std::string> meta = {
      {"brigade", kFormat},
      {"model", model::print_model(model)},
      {"step", std::to_string(resume_point.step)},
      {"epoch", std::to_string(resume_point.epoch)},
      {"batch", std::to_string(resume_point.batch)},
      {"optimizer_steps", std::to_string(optimizer_steps)}};
  for (const auto& [k, v] : recipe) meta["recipe." + k] = v;
  return meta;
}

int64_t number(const st::File& file, const std::string& key) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end())
    throw CheckpointError(file.source + ": not a complete checkpoint: no '" + key + "' entry");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size() || v < 0) throw std::invalid_argument(key);
    return v;
  } catch (const std::exception&) {
    throw CheckpointError(file.source + ": '" + key + "' is '" + it->second +
                          "', not a non-negative integer");
  }
}

// Settings the recipe gained after checkpoints were first written (recipe_of, run_inputs.h):
// a checkpoint without one was written before brigade-train recorded it, and resumes as it
// did then.
bool added_later(const std::string& setting) { return setting == "train_samples"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

bool is_checkpoint_file(const std::string& path) {
  try {
    const st::File file = st::read_header(path);
    const auto it = file.metadata.find("brigade");
    return it != file.metadata.end() && it->second == kFormat;
  } catch (const std::exception&) {
    return false;  // not readable as safetensors: load_parameters says why
  }
}

std::optional<int> checkpoint_microbatches(const std::string& dir) {
  try {
    const st::File file = st::read_header(checkpoint_path(dir));
    const auto format = file.metadata.find("brigade");
    if (format == file.metadata.end() || format->second != kFormat) return std::nullopt;
    const int64_t m = number(file, "recipe.microbatches");
    if (m < 1 || m > std::numeric_limits<int>::max()) return std::nullopt;
    return static_cast<int>(m);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.safetensors").string();
}

void save_checkpoint(const std::string& dir, const model::ModelSpec& model, const Recipe& recipe,
                     const ResumePoint& resume_point,
                     const std::vector<layers::Parameter*>& params,
                     const std::vector<layers::Optimizer*>& optimizers) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw CheckpointError("cannot create checkpoint directory '" + dir + "': " + ec.message());

  const std::vector<layers::NamedTensor> tensors = tensors_of(params, optimizers);
  std::vector<std::vector<float>> host;  // the bytes, alive until written
  host.reserve(tensors.size());
  std::vector<st::TensorToWrite> out;
  for (const layers::NamedTensor& t : tensors) {
    host.push_back(t.tensor.to_vector());  // waits for the tensor's stream
    const std::vector<float>& v = host.back();
    out.push_back({t.name, st::Dtype::F32, t.tensor.shape().dims(),
                   {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)}});
  }
  for (size_t i = 0; i < tensors.size(); ++i) {  // a NaN or an Inf: the old file stays
    const std::string bad =
        first_non_finite(host[i], tensors[i].name, tensors[i].tensor.shape().dims());
    if (!bad.empty())
      throw CheckpointError(
          diverged(resume_point.step, "refusing to write the checkpoint, " + bad) +
          (std::filesystem::exists(checkpoint_path(dir))
               ? "; the previous checkpoint stays in " + checkpoint_path(dir)
               : "; no checkpoint written"));
  }
  try {
    st::write_file(checkpoint_path(dir), out,
                   metadata(model, recipe, resume_point, optimizers.at(0)->steps()));
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("cannot write the checkpoint: ") + e.what());
  }
}

uint64_t checkpoint_file_size(const model::ModelSpec& model, const Recipe& recipe,
                              std::span<const std::string_view> state_prefixes) {
  std::vector<st::Expected> tensors = layers::parameter_layout(model);
  const size_t params = tensors.size();
  for (std::string_view prefix : state_prefixes)
    for (size_t i = 0; i < params; ++i)
      tensors.push_back({std::string(prefix) + tensors[i].name, st::Dtype::F32, tensors[i].shape});
  // The counters at their widest: 19 digits, the most a non-negative int64_t has.
  constexpr int64_t kWidest = std::numeric_limits<int64_t>::max();
  return st::file_size(tensors, metadata(model, recipe, {kWidest, kWidest, kWidest}, kWidest));
}

std::string model_difference(const std::string& checkpoint_model, const std::string& run_model) {
  const std::vector<std::string> a = lines_of(checkpoint_model), b = lines_of(run_model);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(end of model)";
    const std::string y = i < b.size() ? b[i] : "(end of model)";
    if (x != y)
      return "line " + std::to_string(i + 1) + " of the model differs: the checkpoint's is '" +
             printable(x) + "', this run's is '" + printable(y) + "'";
  }
  return "";
}

std::string not_a_checkpoint(const std::string& path) {
  st::File file;
  try {
    file = st::read_header(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  const auto it = file.metadata.find("brigade");
  const std::string format = it == file.metadata.end() ? "(missing)" : it->second;
  if (format == kFormat) return "";
  return "its 'brigade' entry is '" + printable(format) + "', expected '" + kFormat + "'";
}

ResumePoint load_checkpoint(const std::string& dir, const model::ModelSpec& model,
                            const Recipe& recipe, const std::vector<layers::Parameter*>& params,
                            const std::vector<layers::Optimizer*>& optimizers) {
  const std::string path = checkpoint_path(dir);
  if (!std::filesystem::exists(path))
    throw CheckpointError("--resume: no checkpoint in '" + dir + "' (expected " + path + ")");
  st::File file;
  try {
    file = st::read_file(path);  // validates everything: a truncated file stops here
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("corrupt checkpoint: ") + e.what());
  }
  const auto meta = [&](const std::string& key) -> std::string {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? "(missing)" : it->second;
  };
  if (meta("brigade") != kFormat)
    throw CheckpointError(path + ": not a brigade-train checkpoint (its 'brigade' entry is '" +
                          printable(meta("brigade")) + "', expected '" + kFormat + "')");
  const std::string diff = model_difference(meta("model"), model::print_model(model));
  if (!diff.empty()) throw CheckpointError(path + " is of another model: " + diff);

  std::string recipe_diff;
  for (const auto& [k, v] : recipe)
    if (meta("recipe." + k) != v && !(added_later(k) && !file.metadata.count("recipe." + k)))
      recipe_diff += "\n  " + k + ": checkpoint " + printable(meta("recipe." + k)) + ", this run " + v;
  // A setting the checkpoint's run had and this one does not (one written only when on).
  for (const auto& [key, v] : file.metadata)
    if (key.starts_with("recipe.") && !recipe.count(key.substr(7)))
      recipe_diff += "\n  " + printable(key.substr(7)) + ": checkpoint " + printable(v) +
                     ", this run (missing)";
  if (!recipe_diff.empty())
    throw CheckpointError(path + " was written by a run with other settings; resuming it would "
                          "not continue that run:" + recipe_diff);

  std::vector<layers::NamedTensor> tensors = tensors_of(params, optimizers);
  std::vector<st::Expected> expected;
  for (const layers::NamedTensor& t : tensors)
    expected.push_back({t.name, st::Dtype::F32, t.tensor.shape().dims()});
  const std::vector<std::string> mismatch = st::mismatches(file, expected);
  if (!mismatch.empty()) {
    std::string m = path + " does not match this model's tensors:";
    for (const std::string& s : mismatch) m += "\n  " + s;
    throw CheckpointError(m);
  }
  const ResumePoint resume_point{number(file, "step"), number(file, "epoch"),
                                 number(file, "batch")};
  const int64_t optimizer_steps = number(file, "optimizer_steps");
  // The values on the host; a NaN or an Inf (a file written before brigade-train refused
  // them) is refused too.
  std::vector<std::vector<float>> values;
  for (const layers::NamedTensor& t : tensors) {
    const std::span<const uint8_t> bytes = file.bytes(*file.find(t.name));
    std::vector<float>& v = values.emplace_back(static_cast<size_t>(t.tensor.numel()));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    const std::string bad = first_non_finite(v, t.name, t.tensor.shape().dims());
    if (!bad.empty())
      throw CheckpointError(path + ": " + bad + ": the run that wrote it had diverged");
  }

  // Everything checked: now copy in.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    const Stream& s = t.stream();
    const Tensor staged = Tensor::from_vector(values[i], t.shape(), s);
    copy_async(t, staged, s);  // into the existing storage, which the modules hold
    s.synchronize();
  }
  for (layers::Optimizer* o : optimizers) o->set_steps(optimizer_steps);
  return resume_point;
}

}  // namespace brigade::train

// --model NAME|FILE, the same in every tool that takes a model: an existing file, or a path
// (a '/' or a ".model" ending), else the shipped tools/models/NAME.model — found through the
// directory the build was configured in (BRIGADE_MODELS_DIR), so a tool finds its models from
// any working directory, not only from the repository root.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace brigade::models {

// The file `name` means, or "" when it is a bare name that is no file and no shipped model.
inline std::string find_model(const std::string& name, const std::string& models_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(name, ec) || name.find('/') != std::string::npos || name.ends_with(".model"))
    return name;
  const fs::path file = fs::path(models_dir) / (name + ".model");
  return fs::exists(file, ec) ? file.string() : std::string();
}

// The shipped models' names ("mlp", "seed_cnn", ...), sorted, for messages.
inline std::string shipped_models(const std::string& models_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(models_dir, ec))
    if (entry.path().extension() == ".model") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace brigade::models

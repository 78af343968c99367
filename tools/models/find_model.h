// --model NAME|FILE, the same in every tool that takes a model: an existing file, else the
// shipped tools/models/NAME.model (NAME.model naming it too), else a path (a '/' or a
// ".model" ending) that the reader says is missing — the shipped models found through the
// directory the build was configured in (BRIGADE_MODELS_DIR), so a tool finds its models from
// any working directory, not only from the repository root. load_model() reads it, with the
// same message in every tool for a name that is neither.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "tools/command_line.h"

namespace brigade::models {

// The file `name` means, or "" when it is a bare name that is no file and no shipped model.
// A shipped model's file name ("tiny_cnn.model") finds it too, from any directory; a path
// that is no file is returned as it is, for the reader to say so.
inline std::string find_model(const std::string& name, const std::string& models_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(name, ec)) return name;
  const bool path = name.find('/') != std::string::npos;
  if (!path) {
    const fs::path file =
        fs::path(models_dir) / (name.ends_with(".model") ? name : name + ".model");
    if (fs::exists(file, ec)) return file.string();
  }
  return path || name.ends_with(".model") ? name : std::string();
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

// The model --model `name` means, read and checked (layers/model/model_file.h). Throws
// cli::UsageError naming the shipped models when `name` is neither a file nor one of them
// (the same words in every tool), model::ModelFileError for a file that is not a model.
inline model::ModelSpec load_model(const std::string& name, const std::string& models_dir) {
  const std::string file = find_model(name, models_dir);
  if (file.empty())
    throw cli::UsageError("--model '" + name + "': no such file, and no model of that name in " +
                          models_dir + " (" + shipped_models(models_dir) + ")");
  return model::load_model_file(file);
}

// load_model() for a program that has nothing to do without its model: the model, or nullopt
// after printing "program: why" on stderr, for the program to exit with cli::kUsageStatus (a
// model file that is not one is bad input, as a bad flag is).
inline std::optional<model::ModelSpec> load_model_or_say_why(const std::string& name,
                                                             const std::string& models_dir,
                                                             const char* program) {
  const auto say_why = [program](const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  };
  try {
    return load_model(name, models_dir);
  } catch (const cli::UsageError& e) {
    say_why(e);
  } catch (const model::ModelFileError& e) {
    say_why(e);
  }
  return std::nullopt;
}

}  // namespace brigade::models

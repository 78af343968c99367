// See run_inputs.h.
#include "tools/train/run_inputs.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/models/find_model.h"

#ifndef BRIGADE_MODELS_DIR
#define BRIGADE_MODELS_DIR "tools/models"
#endif

namespace brigade::train {

model::ModelSpec load_model(const std::string& name) {
  return models::load_model(name, BRIGADE_MODELS_DIR);
}

void check_model_fits_data(const model::ModelSpec& spec, const data::Dataset& d) {
  const std::vector<int64_t> input = {1, d.channels, d.height, d.width};
  if (spec.input != input)
    throw UsageError("the model's input is " + model::format_dims(spec.input) + " but " + d.name +
                     " has images " + model::format_dims(input) + " (write `input " +
                     std::to_string(d.height) + "x" + std::to_string(d.width) + "x" +
                     std::to_string(d.channels) + "`)");
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  const std::vector<int64_t> output = {1, d.classes};
  if (shapes.layers.back().output != output)
    throw UsageError("the model's output is " + model::format_dims(shapes.layers.back().output) +
                     " but " + d.name + " has " + std::to_string(d.classes) +
                     " classes: the last layer should be `dense units=" +
                     std::to_string(d.classes) + " activation=softmax`");
}

data::Dataset load_split(const Options& o, data::Split split) {
  if (o.data == "synthetic" && o.synthetic_count > 0) {
    const int64_t n = split == data::Split::train ? o.synthetic_count
                                                  : std::max<int64_t>(1, o.synthetic_count / 6);
    return data::make_synthetic(split, o.seed, n);
  }
  return data::load_dataset(o.data, o.data_dir.empty() ? data::kFashionMnistDir : o.data_dir,
                            split, o.seed);
}

Recipe recipe_of(const Options& o, int microbatches, int replicas, int64_t train_samples) {
  char lr[32], mom[32], wd[32];
  std::snprintf(lr, sizeof lr, "%.17g", o.lr);
  std::snprintf(mom, sizeof mom, "%.17g", o.momentum);
  std::snprintf(wd, sizeof wd, "%.17g", o.weight_decay);
  Recipe r = {{"seed", std::to_string(o.seed)},       {"batch", std::to_string(o.batch)},
              {"shuffle", o.no_shuffle ? "no" : "yes"}, {"data", o.data},
              {"synthetic_count", std::to_string(o.synthetic_count)},
              {"optimizer", o.optimizer},             {"lr", lr},
              {"momentum", mom},                      {"weight_decay", wd},
              {"microbatches", std::to_string(microbatches)},
              {"train_samples", std::to_string(train_samples)}};
  if (o.clip_grad_norm > 0) {  // absent when off: checkpoints of earlier runs still resume
    char clip[32];
    std::snprintf(clip, sizeof clip, "%.17g", o.clip_grad_norm);
    r["clip_grad_norm"] = clip;
  }
  if (replicas > 1) r["data_parallel"] = std::to_string(replicas);
  return r;
}

}  // namespace brigade::train

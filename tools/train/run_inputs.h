// What a run reads before its first step, each checked as it is read: the model (--model
// NAME|FILE), which must fit the data; the training and test sets (Fashion-MNIST, or
// synthetic); and the recipe, the settings a checkpoint must agree on to resume exactly.
#pragma once

#include "layers/model/model_file.h"
#include "tools/data/dataset.h"
#include "tools/train/checkpoint.h"
#include "tools/train/options.h"

namespace brigade::train {

// --model NAME|FILE: an existing file, else tools/models/NAME.model (tools/models/find_model.h).
// Throws UsageError for neither; a malformed file throws as layers/model/model_file.h says.
model::ModelSpec load_model(const std::string& name);

// The model must read the data's images and give one logit per class; throws UsageError
// saying what to write instead.
void check_model_fits_data(const model::ModelSpec& spec, const data::Dataset& d);

// --data (synthetic: --synthetic-count samples, a sixth as many for the test split).
data::Dataset load_split(const Options& o, data::Split split);

// What a resumed run must share with the run that wrote the checkpoint. Replicas sum their
// gradients in another order than one process: with more than one, the recipe says how many.
// `train_samples`, the training set's size: a checkpoint's (epoch, batch) place the run in an
// epoch of that many samples (and --data-dir names no set by its contents).
Recipe recipe_of(const Options& o, int microbatches, int replicas, int64_t train_samples);

}  // namespace brigade::train

// A model's parameters in a safetensors file (layers/model/safetensors.h), under PyTorch's names
// and layouts: `<layer>.weight` (conv OIHW (K, C, R, S), dense (out, in)) and `<layer>.bias`,
// float32 ("F32"), so torch.nn.Module.load_state_dict takes them after a name map.
//
// save_parameters waits for the values (a blocking copy to the host, on each parameter's
// stream) and writes the file atomically (temporary file, fsync, rename). load_parameters
// checks the file against the parameters first — every missing, unexpected, mis-shaped or
// mis-typed tensor reported in one error — and only then copies the values in, so a bad
// file changes nothing. The round trip is bit-exact: bytes in, the same bytes out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "layers/model/model_file.h"
#include "layers/model/safetensors.h"
#include "layers/tape.h"

namespace brigade::layers {

void save_parameters(const std::vector<Parameter*>& params, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {});

void load_parameters(const std::vector<Parameter*>& params, const std::string& path);

// The tensors save_parameters writes for `spec`'s parameters (names, dtypes and shapes, in its
// order), from the model's description alone: safetensors::file_size gives what the file will
// need before any parameter exists.
std::vector<safetensors::Expected> parameter_layout(const model::ModelSpec& spec);

}  // namespace brigade::layers
